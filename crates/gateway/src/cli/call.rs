//! `aai-gateway call`: one tool through the same pipeline as MCP calls.

use std::io::IsTerminal;
use std::process::ExitCode;

use aai_descriptor::{AaiError, Platform};
use aai_engine::config::Config;
use aai_engine::pipeline::{self, Caller, Pipeline as _, render};

use super::{DATA_DB, for_person, output};

/// What `call` was asked to do.
pub struct Request<'a> {
    pub app: &'a str,
    /// `None`: print the app's guide.
    pub tool: Option<&'a str>,
    pub args: &'a serde_json::Value,
    pub dry_run: bool,
    pub platform: Option<Platform>,
}

pub async fn run(
    home: &std::path::Path,
    dev: bool,
    request: Request<'_>,
) -> anyhow::Result<ExitCode> {
    let (mut config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    if let Some(platform) = request.platform {
        config.platforms = vec![platform];
    }
    let options = aai_compose::scan_options(home, &config, dev);
    let registry = aai_engine::scan_once(&options, &config.platforms);
    let max = config.max_result_chars;
    let executors = aai_compose::executors(&config, home);
    let gateway = aai_compose::fixed_gateway(registry, config, executors, home.join(DATA_DB));
    let Some(tool) = request.tool else {
        // What the agent reads before it calls: the app's tools, their parameters, an example.
        let registry = gateway.snapshot().await;
        return match gateway.guide(&registry, request.app).await {
            Ok(guide) if output::json() => {
                output::value(&serde_json::json!({"app": request.app, "guide": guide}));
                Ok(ExitCode::SUCCESS)
            }
            Ok(guide) => {
                output::line(&guide);
                output::line(&format!(
                    "From the command line: aai-gateway call {} TOOL --args '{{…}}'",
                    request.app
                ));
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                super::report(&error);
                Ok(ExitCode::from(1))
            }
        };
    };
    let result = if request.dry_run {
        gateway.plan(request.app, tool, request.args).await
    } else {
        // At a terminal, a call that needs approval asks the person at the keyboard.
        let asker = (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
            .then_some(output::TerminalAsker);
        let who = Caller::named("cli");
        let call = pipeline::Request::tool(&who, request.app, tool, request.args)
            .asking(asker.as_ref().map(|a| a as &dyn aai_engine::consent::Asker));
        gateway.call(call).await.into_result()
    };
    match result {
        Ok(plan) if request.dry_run => {
            output::plan(&plan);
            Ok(ExitCode::SUCCESS)
        }
        Ok(result) if output::json() => {
            output::value(&result);
            Ok(ExitCode::SUCCESS)
        }
        Ok(result) => {
            output::call_output(&render(&result, max).text);
            Ok(ExitCode::SUCCESS)
        }
        Err(AaiError { kind, message, .. }) => {
            eprintln!(
                "{} ({}): {}",
                kind.type_name(),
                kind.code(),
                for_person(&message)
            );
            Ok(ExitCode::from(1))
        }
    }
}
