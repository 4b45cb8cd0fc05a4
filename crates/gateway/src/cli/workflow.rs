//! `aai-gateway workflow`: list, check and run workflow files.

use std::io::IsTerminal;
use std::process::ExitCode;

use aai_engine::config::Config;
use aai_engine::pipeline::{Caller, Pipeline as _, Request};
use aai_engine::workflow;
use aai_engine::workflow::Workflow;
use anyhow::Context;
use clap::Subcommand;

use super::{DATA_DB, output, report};

#[derive(Subcommand, Debug)]
pub enum Action {
    /// The workflows in AAI_HOME/workflows, each with its description or its problem.
    List,
    /// Check a workflow (a name, or a file anywhere); exit 1 with its problem if it is invalid.
    Validate { workflow: String },
    /// Run a workflow through the same gate as MCP calls, and print each step's outcome.
    Run {
        name: String,
        /// The inputs as a JSON object.
        #[arg(long, default_value = "{}")]
        inputs: String,
    },
    /// Print the JSON Schema of a workflow file.
    Schema,
}

pub async fn run(home: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Schema => {
            output::line(&serde_json::to_string_pretty(&Workflow::schema())?);
            Ok(ExitCode::SUCCESS)
        }
        Action::List => {
            let found = workflow::scan(home);
            if found.is_empty() {
                output::line(&format!(
                    "no workflows (put them in {}/<name>.json)",
                    home.join(workflow::DIR).display()
                ));
            }
            for workflow::Found {
                name, path, loaded, ..
            } in found
            {
                output::line(&match loaded {
                    Ok(w) => format!("{name}  {} step(s)  {}", w.steps.len(), w.description),
                    Err(problem) => format!("{name}  INVALID  {problem} ({})", path.display()),
                });
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Validate { workflow: which } => {
            let path = if which.ends_with(".json") || which.contains('/') {
                std::path::PathBuf::from(&which)
            } else {
                home.join(workflow::DIR).join(format!("{which}.json"))
            };
            match Workflow::load(&path) {
                Ok(w) => {
                    output::line(&format!(
                        "{}: valid, {} step(s)",
                        path.display(),
                        w.steps.len()
                    ));
                    Ok(ExitCode::SUCCESS)
                }
                Err(problem) => {
                    eprintln!("{problem}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Action::Run { name, inputs } => {
            let inputs: serde_json::Value =
                serde_json::from_str(&inputs).context("--inputs is not valid JSON")?;
            let (config, problem) = Config::load(home);
            if let Some(problem) = problem {
                eprintln!("warning: {problem}");
            }
            let options = aai_compose::scan_options(home, &config, false);
            let registry = aai_engine::scan_once(&options, &config.platforms);
            let executors = aai_compose::executors(&config, home);
            let gateway =
                aai_compose::fixed_gateway(registry, config, executors, home.join(DATA_DB));
            // At a terminal, a step that needs approval asks the person at the keyboard.
            let asker = (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
                .then_some(output::TerminalAsker);
            let who = Caller::named("cli");
            let request = Request::workflow(&who, &name, &inputs)
                .asking(asker.as_ref().map(|a| a as &dyn aai_engine::consent::Asker));
            let ran = gateway.call(request).await.into_result();
            match ran {
                Ok(report) => {
                    output::report(&report);
                    Ok(if report["failed"] == 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    })
                }
                Err(error) => {
                    report(&error);
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}
