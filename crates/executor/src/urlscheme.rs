//! The iOS executor (the `ios` section, `automation: "url_scheme"`): opens the tool's URL in
//! a simulator (`xcrun simctl openurl`) or on the Mac (`open`). The URL's structure comes
//! from the template; values are percent-encoded for the component they fill
//! ([`aai_descriptor::url`]).

use std::sync::Arc;

use aai_descriptor::url::UrlTemplate;
use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform};
use serde_json::{Value, json};

use crate::process::{self, Command, Output};
use crate::{
    BoxFuture, Executor, Invocation, IosOpener, Settings, describe, json_text, section_tool,
};

pub struct UrlSchemeExecutor {
    settings: Arc<Settings>,
}

struct Planned {
    url: String,
    commands: Vec<Command>,
    result_type: Option<String>,
}

impl UrlSchemeExecutor {
    pub fn new(settings: Arc<Settings>) -> Self {
        Self { settings }
    }

    fn planned(&self, invocation: &Invocation<'_>) -> Result<Planned, AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.ios.as_ref(),
            invocation,
            Platform::Ios,
        )?;
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        let template = UrlTemplate::parse(&tool.fields.url_template, &section.fields.scheme)
            .map_err(|message| {
                AaiError::new(
                    ErrorKind::ScriptParseError,
                    format!("{}: {message}", invocation.name()),
                )
            })?;
        let url = template
            .fill(&|name| invocation.value(schema.as_ref(), name))
            .map_err(|e| invocation.unfilled(e))?;
        let settings = &self.settings;
        let device = settings.ios_device.as_str();
        let mut commands = vec![match settings.ios_opener {
            IosOpener::Simctl => {
                Command::new(&settings.xcrun).args(["simctl", "openurl", device, url.as_str()])
            }
            IosOpener::Open => Command::new(&settings.open).arg(url.as_str()),
        }];
        let result_type = tool.fields.result_type.clone();
        if result_type.as_deref() == Some("clipboard") {
            commands.push(match settings.ios_opener {
                IosOpener::Simctl => {
                    Command::new(&settings.xcrun).args(["simctl", "pbpaste", device])
                }
                IosOpener::Open => Command::new(&settings.pbpaste),
            });
        }
        Ok(Planned {
            url,
            commands,
            result_type,
        })
    }
}

impl Executor for UrlSchemeExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let planned = self.planned(&invocation)?;
            let what = invocation.name();
            let deadline = tokio::time::Instant::now() + invocation.timeout;
            let opened = process::run(&planned.commands[0], invocation.timeout, &what).await?;
            check(&opened, &planned.url, &what)?;
            let mut result = json!({"opened": planned.url});
            if let Some(paste) = planned.commands.get(1) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let clipboard = process::run(paste, left, &what).await?;
                check(&clipboard, &planned.url, &what)?;
                let text = clipboard
                    .stdout
                    .strip_suffix('\n')
                    .unwrap_or(&clipboard.stdout);
                result["result"] =
                    json_text(text).unwrap_or_else(|| Value::String(text.to_owned()));
            } else if planned.result_type.as_deref() == Some("app_group") {
                result["note"] = json!(
                    "The app writes its result to its App Group container, which aai-gateway does not read; the URL was opened."
                );
            }
            Ok(result)
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        Ok(describe(&self.planned(&invocation)?.commands))
    }
}

fn check(output: &Output, url: &str, what: &str) -> Result<(), AaiError> {
    if output.success() {
        return Ok(());
    }
    let all = format!("{}\n{}", output.stdout, output.stderr);
    let lower = all.to_lowercase();
    let detail =
        json!({"output": aai_descriptor::guide::shorten(&all, 2000), "exit_code": output.code});
    let scheme = url.split(':').next().unwrap_or_default();
    let (kind, message) = if lower.contains("no devices are booted")
        || lower.contains("invalid device")
        || lower.contains("unable to boot")
    {
        (
            ErrorKind::AppNotRunning,
            format!(
                "{what}: no simulator is running. Boot one (`xcrun simctl boot <device>` or open Simulator.app), or set `executors.ios_device`, then call again."
            ),
        )
    } else if lower.contains("-10814")
        || lower.contains("no application knows how to open")
        || lower.contains("lsapplicationnotfound")
    {
        (
            ErrorKind::AppNotFound,
            format!(
                "{what}: no installed app handles `{scheme}:` URLs; install the app on the device and call again."
            ),
        )
    } else {
        (
            ErrorKind::AutomationFailed,
            format!(
                "{what}: opening the URL failed: {}",
                aai_descriptor::guide::shorten(all.trim(), 500)
            ),
        )
    };
    Err(AaiError::new(kind, message).with_detail(detail))
}
