//! The terminal as the gate sees it: its calls run, refused, asked about and rated
//! ([`crate::Toolset`]).

use super::*;

impl crate::Toolset for Terminal {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: crate::Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let outside = aai_sandbox::profile::asks_outside(call.args);
            match call.tool {
                "bash_execute" if outside && arg_str(call.args, "session_id").is_none() => {
                    self.execute_outside(&call).await
                }
                "bash_execute" => {
                    let id = arg_str(call.args, "session_id").unwrap_or("default");
                    let runs_outside = self.sessions.outside(call.caller, id);
                    if outside && runs_outside.is_none() {
                        return Err(AaiError::new(
                            ErrorKind::InvalidParams,
                            format!("session {id:?} runs in the sandbox; leave session_id out to run this one command outside it, or create a session with bash_session {{\"action\": \"create\", \"outside_sandbox\": true, \"reason\": …}}"),
                        )
                        .with_detail(json!({"field": "session_id"})));
                    }
                    if runs_outside.is_some() && !call.approved {
                        return Err(AaiError::new(
                            ErrorKind::PermissionDenied,
                            format!(
                                "session {id:?} runs outside the sandbox: each of its commands runs only when the user approved it just now"
                            ),
                        ));
                    }
                    let new_hosts = self.new_hosts(call.args);
                    if !call.approved && !new_hosts.is_empty() {
                        return Err(AaiError::new(
                            ErrorKind::PermissionDenied,
                            "hosts beyond the egress policy are reached only when the user approved this command just now",
                        )
                        .with_detail(json!({"reason": "hosts_not_approved"})));
                    }
                    self.make_start(call.roots);
                    let place = self.place(call.roots, None);
                    // The proxy lets through, for this command, exactly the hosts the user
                    // was asked about: those the policy does not allow already.
                    let args = if call.args.contains_key("hosts") {
                        let mut args = call.args.clone();
                        args.insert("hosts".into(), json!(new_hosts));
                        std::borrow::Cow::Owned(args)
                    } else {
                        std::borrow::Cow::Borrowed(call.args)
                    };
                    self.sessions
                        .execute(call.caller, &args, &place, call.progress)
                        .await
                }
                "bash_session" => {
                    let creates = arg_str(call.args, "action") == Some("create");
                    let reason = if outside && creates {
                        aai_sandbox::profile::check_outside(call.args, call.approved)?;
                        arg_str(call.args, aai_sandbox::profile::REASON).map(str::to_owned)
                    } else {
                        None
                    };
                    if creates {
                        self.make_start(call.roots);
                    }
                    let place = self.place(call.roots, reason);
                    self.sessions.manage(call.caller, call.args, &place).await
                }
                other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
            }
        })
    }

    fn refusal(&self, call: &crate::Call<'_>) -> Option<AaiError> {
        let starts = call.tool == "bash_execute"
            || (call.tool == "bash_session" && arg_str(call.args, "action") == Some("create"));
        if !starts {
            return None;
        }
        let place = self.place(call.roots, None);
        if let Some(sandbox) = &place.sandbox
            && sandbox.allowed().is_empty()
        {
            return Some(no_folder(
                &self.setup.config.sandbox.allowed_directories,
                !call.roots.is_empty(),
            ));
        }
        let dir = arg_str(call.args, "working_dir")?;
        checked_dir(dir, &place).err()
    }

    fn must_ask<'a>(&'a self, call: &'a crate::Call<'a>) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            if aai_sandbox::profile::asks_outside(call.args)
                && (call.tool == "bash_execute" || arg_str(call.args, "action") == Some("create"))
            {
                return Some(aai_sandbox::profile::outside_question(call.args));
            }
            if call.tool != "bash_execute" {
                return None;
            }
            let new = self.new_hosts(call.args);
            if !new.is_empty() {
                return Some(format!(
                    "it asks to reach {} besides the package registries and local.egress.allow",
                    new.join(", ")
                ));
            }
            let id = arg_str(call.args, "session_id").unwrap_or("default");
            self.sessions.outside(call.caller, id).map(|reason| {
                format!(
                    "it runs in session {id:?}, which runs OUTSIDE the sandbox with your full rights (asked for every command); the agent's reason when it was made: {reason}"
                )
            })
        })
    }

    fn rate(&self, call: &crate::Call<'_>, boxed: bool) -> Option<crate::Rated> {
        self.rate_call(call, boxed)
    }

    fn binding(&self, call: &crate::Call<'_>) -> Option<crate::Binding> {
        if call.tool != "bash_execute" || aai_sandbox::profile::asks_outside(call.args) {
            return None;
        }
        let id = arg_str(call.args, "session_id").unwrap_or("default");
        if self.sessions.outside(call.caller, id).is_some() {
            return None;
        }
        let keys = self.new_hosts(call.args);
        (!keys.is_empty()).then_some(crate::Binding { keys })
    }

    fn emergency_stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.sessions
                .end_all("the emergency stop ended it and killed its processes");
        })
    }

    fn waits_ms(&self, tool: &str, args: &Map<String, Value>) -> u64 {
        match tool {
            "bash_execute" => args
                .get("timeout_ms")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_TIMEOUT_MS),
            _ => 0,
        }
    }

    fn prefix_covers(&self, tool: &str, args: &Map<String, Value>, prefixes: &[String]) -> bool {
        grants::prefix_covers(tool, args, prefixes)
    }

    fn offered_prefix(&self, tool: &str, args: &Map<String, Value>) -> Option<String> {
        grants::offered_prefix(tool, args)
    }
}
