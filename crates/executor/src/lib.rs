//! Runs `aai.json` tools through each platform's automation interface.
//!
//! One [`Executor`] per automation kind; [`Executors`] picks the one a descriptor's section
//! asks for. Argument values are always passed as data (typed D-Bus arguments here), never
//! spliced into program text. Every call is bounded by its timeout.
//!
//! This crate does not validate arguments against the tool's schema, ask for consent or
//! write the audit log: the gateway's call pipeline does that before calling in.
//!
//! ```no_run
//! # async fn demo(descriptor: &aai_descriptor::Descriptor) {
//! use std::time::Duration;
//! let executors = aai_executor::Executors::new();
//! let args = serde_json::Map::new();
//! let invocation = aai_executor::Invocation::new(descriptor, "ping", &args, Duration::from_secs(5));
//! let result = executors.call(aai_descriptor::Platform::Linux, invocation).await;
//! # }
//! ```

mod dbus;
pub mod process;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform};
use serde_json::{Map, Value};

pub use dbus::DbusExecutor;

/// The timeout of a call when neither the tool nor the config sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A boxed future, so executors can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One tool call, with arguments already checked against the tool's schema.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    pub descriptor: &'a Descriptor,
    pub tool: &'a str,
    pub args: &'a Map<String, Value>,
    /// How long the whole call may take.
    pub timeout: Duration,
}

impl<'a> Invocation<'a> {
    pub fn new(
        descriptor: &'a Descriptor,
        tool: &'a str,
        args: &'a Map<String, Value>,
        timeout: Duration,
    ) -> Self {
        Self {
            descriptor,
            tool,
            args,
            timeout,
        }
    }
}

/// Runs tools of one automation kind.
pub trait Executor: Send + Sync {
    /// Runs the tool and returns its parsed output as JSON.
    ///
    /// # Errors
    /// An [`AaiError`] with the kind that fits: `APP_NOT_RUNNING`, `TIMEOUT`,
    /// `PERMISSION_DENIED`, `AUTOMATION_FAILED`, …
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>>;
}

/// The executors this build carries.
#[derive(Default)]
pub struct Executors {
    dbus: DbusExecutor,
}

impl Executors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Executors whose D-Bus session bus is at `address` instead of the environment's.
    pub fn with_session_bus(address: impl Into<String>) -> Self {
        Self {
            dbus: DbusExecutor::with_session_address(address),
        }
    }

    /// The executor for `platform`'s section of `descriptor`.
    ///
    /// # Errors
    /// `AUTOMATION_NOT_SUPPORTED` when the section's automation kind has no executor here.
    pub fn for_section(
        &self,
        descriptor: &Descriptor,
        platform: Platform,
    ) -> Result<&dyn Executor, AaiError> {
        let automation = descriptor.automation(platform).unwrap_or("none");
        match (platform, automation) {
            (Platform::Linux, "dbus") => Ok(&self.dbus),
            _ => Err(AaiError::new(
                ErrorKind::AutomationNotSupported,
                format!(
                    "{} uses `{automation}` automation on {}, which this build of aai-gateway cannot run",
                    descriptor.app_id,
                    platform.key()
                ),
            )),
        }
    }

    /// Runs a tool of `platform`'s section.
    ///
    /// # Errors
    /// See [`Executor::call`] and [`Executors::for_section`].
    pub async fn call(
        &self,
        platform: Platform,
        invocation: Invocation<'_>,
    ) -> Result<Value, AaiError> {
        self.for_section(invocation.descriptor, platform)?
            .call(invocation)
            .await
    }
}
