//! What the script executors add to a call: planning (script rewriting, quoting, encoding)
//! and starting a program in its own process group.

use std::hint::black_box;
use std::time::Duration;

use aai_descriptor::Platform;
use aai_executor::process::{Command, run};
use aai_executor::{Executors, Invocation};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn descriptor() -> aai_descriptor::Descriptor {
    let params = json!({"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}}});
    let doc = json!({"schema_version": "1.0", "appId": "com.example.mail", "name": "Mail", "platforms": {
        "macos": {"automation": "jxa", "tools": [{"name": "send", "description": "Send", "parameters": params,
            "script": "const Mail = Application('Mail');\nconst m = Mail.OutgoingMessage({subject: '${subject}', content: '${body}'});\nm.toRecipients.push(Mail.ToRecipient({address: '${to}'}));\nm.send();\nreturn {sent: true};",
            "output_parser": "result as record"}]},
        "android": {"automation": "intent", "package": "com.example.mail", "tools": [{"name": "send", "description": "Send", "parameters": params,
            "action": "com.example.SEND", "extras": {"to": "${to}", "subject": "${subject}", "body": "${body}"}}]},
        "windows": {"automation": "com", "progid": "Outlook.Application", "tools": [{"name": "send", "description": "Send", "parameters": params,
            "script": [{"action": "create", "var": "app"}, {"action": "call", "var": "m", "object": "app", "method": "CreateItem", "args": [0]},
                       {"action": "set", "object": "m", "property": "To", "value": "${to}"}, {"action": "call", "object": "m", "method": "Send"}]}]},
        "ios": {"automation": "url_scheme", "scheme": "mailapp", "tools": [{"name": "send", "description": "Send", "parameters": params,
            "url_template": "mailapp://send?to=${to}&subject=${subject}&body=${body}"}]}
    }});
    aai_descriptor::parse("bench", doc.to_string().as_bytes()).expect("valid")
}

fn planning(c: &mut Criterion) {
    let descriptor = descriptor();
    let executors = Executors::new();
    let args = json!({"to": "bob@example.com", "subject": "It's \"quoted\" $(id)", "body": "Line one\nLine two"});
    let args = args.as_object().expect("object").clone();
    for platform in [
        Platform::Macos,
        Platform::Android,
        Platform::Windows,
        Platform::Ios,
    ] {
        c.bench_function(&format!("plan {}", platform.key()), |b| {
            b.iter(|| {
                let invocation =
                    Invocation::new(&descriptor, "send", &args, Duration::from_secs(5));
                black_box(executors.plan(platform, invocation).expect("plan"))
            })
        });
    }
}

fn spawning(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let command = Command::new("true");
    c.bench_function("run `true` in its own process group", |b| {
        b.iter(|| {
            runtime
                .block_on(run(&command, Duration::from_secs(5), "bench"))
                .expect("ran")
        })
    });
}

criterion_group!(benches, planning, spawning);
criterion_main!(benches);
