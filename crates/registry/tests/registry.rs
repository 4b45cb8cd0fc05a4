//! The registry against a real PostgreSQL: publishing (signature, namespace, the gateway's own
//! descriptor checks), ranked and typo-tolerant search, bad input that changes nothing, and two
//! server processes on one database answering the same.

mod common;

use aai_test_support::postgres as support;
use common::{Publisher, get, post, registry};
use serde_json::{Value, json};

fn descriptor(
    app_id: &str,
    name: &str,
    description: &str,
    tools: &[&str],
    version: &str,
) -> String {
    json!({
        "schema_version": "1.0", "appId": app_id, "name": name, "description": description,
        "version": version, "aliases": [],
        "platforms": {"web": {"automation": "restapi", "base_url": "https://api.example.com", "auth": {"type": "none"},
            "tools": tools.iter().map(|t| json!({"name": t, "description": format!("{t} things"), "endpoint": format!("/{t}")})).collect::<Vec<_>>()}}
    })
    .to_string()
}

fn ids(found: &Value) -> Vec<String> {
    found["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["appId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn published_apps_are_found_ranked_and_served_as_signed() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    for (id, name, description, tools) in [
        (
            "com.acme.spotify",
            "Spotify Music",
            "Play songs and podcasts",
            &["play", "pause", "search_tracks"][..],
        ),
        (
            "com.acme.mail",
            "Acme Mail",
            "Send and read email; works with any music newsletter",
            &["send_message", "list_inbox"][..],
        ),
        (
            "com.acme.notes",
            "Notes",
            "Write notes",
            &["create_note"][..],
        ),
    ] {
        let (status, body) = acme
            .publish(
                &server.base,
                &descriptor(id, name, description, tools, "1.0.0"),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    // Ranked: the app named for the word first, the one that only mentions it after.
    let (_, found) = get(&server.base, "/api/v1/search?q=music").await;
    assert_eq!(
        ids(&found)[..2],
        ["com.acme.spotify", "com.acme.mail"],
        "{found}"
    );
    // Typos and tool names.
    for (query, expected) in [
        ("spotfy", "com.acme.spotify"),
        ("acme mial", "com.acme.mail"),
        ("send message", "com.acme.mail"),
        ("create_note", "com.acme.notes"),
    ] {
        let (status, found) = get(&server.base, &format!("/api/v1/search?q={query}")).await;
        assert_eq!(status, 200);
        assert_eq!(
            ids(&found).first().map(String::as_str),
            Some(expected),
            "{query}: {found}"
        );
    }
    // The list the gateway reads, and the exact signed bytes behind each descriptor_url.
    let (_, listed) = get(&server.base, "/api/v1/apps").await;
    let apps = listed["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), 3);
    let url = apps[0]["descriptor_url"].as_str().expect("url").to_owned();
    let response = reqwest::get(&url).await.expect("descriptor");
    let signature = response.headers()["x-aai-signature"]
        .to_str()
        .expect("sig")
        .to_owned();
    let text = response.text().await.expect("text");
    let (_, details) = get(&server.base, "/api/v1/apps/com.acme.mail").await;
    let key = details["publisher"]["public_key"].as_str().expect("key");
    aai_registry::keys::verify(key, text.as_bytes(), &signature)
        .expect("the served bytes are the signed bytes");
    assert_eq!(details["versions"][0]["version"], "1.0.0");
    assert_eq!(details["tools"], json!(["list_inbox", "send_message"]));
    // A new version becomes the latest; the old one stays.
    let (status, _) = acme
        .publish(
            &server.base,
            &descriptor(
                "com.acme.notes",
                "Notes",
                "Write and share notes",
                &["create_note", "share_note"],
                "1.1.0",
            ),
        )
        .await;
    assert_eq!(status, 201);
    let (_, notes) = get(&server.base, "/api/v1/apps/com.acme.notes").await;
    assert_eq!(notes["latest"], "1.1.0");
    assert_eq!(notes["versions"].as_array().map(Vec::len), Some(2));
    let old = reqwest::get(format!(
        "{}/api/v1/apps/com.acme.notes/aai.json?version=1.0.0",
        server.base
    ))
    .await
    .expect("old");
    assert!(old.text().await.expect("text").contains("\"1.0.0\""));
}

#[tokio::test]
async fn bad_input_is_refused_clearly_and_changes_nothing() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    let other = Publisher::add(&server.pool, "other", "org.other").await;
    let good = descriptor("com.acme.app", "App", "An app", &["go"], "1.0.0");
    assert_eq!(acme.publish(&server.base, &good).await.0, 201);
    let before = get(&server.base, "/api/v1/apps").await.1;

    let huge = "x".repeat(aai_registry::api::MAX_BODY + 10);
    assert_eq!(post(&server.base, &huge).await.0, 413);
    let (status, body) = post(&server.base, "{\"publisher\": ").await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .expect("error")
            .contains("not a publish request"),
        "{body}"
    );
    // Signed by another key.
    let forged = aai_registry::keys::sign(&other.secret, good.as_bytes()).expect("sign");
    let (status, body) = post(&server.base, &json!({"publisher": "acme", "descriptor": descriptor("com.acme.app", "App", "Evil", &["go"], "2.0.0"), "signature": forged}).to_string()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .expect("error")
            .contains("signature does not match")
    );
    // Outside the publisher's namespace.
    let (status, body) = other
        .publish(
            &server.base,
            &descriptor("com.acme.takeover", "Takeover", "x", &["go"], "1.0.0"),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .expect("error")
            .contains("outside the namespace")
    );
    // The gateway's own checks, with the same pointer-precise problems.
    let mut invalid: Value = serde_json::from_str(&good).expect("json");
    invalid["platforms"]["web"]["tools"][0]["endpoint"] = json!("/things/${missing}");
    let invalid = invalid.to_string();
    let (status, body) = acme.publish(&server.base, &invalid).await;
    assert_eq!(status, 422, "{body}");
    let expected = aai_descriptor::parse("aai.json", invalid.as_bytes()).expect_err("invalid");
    assert_eq!(
        body["problems"][0]["pointer"], expected.problems[0].pointer,
        "{body}"
    );
    assert_eq!(body["problems"][0]["message"], expected.problems[0].message);
    let (status, body) = acme
        .publish(&server.base, &good.replace("\"1.0.0\"", "\"\""))
        .await;
    assert_eq!(status, 422, "{body}");
    // Same version, other bytes: refused; the very same bytes: nothing to do.
    assert_eq!(
        acme.publish(&server.base, &good.replace("An app", "Changed"))
            .await
            .0,
        409
    );
    let (status, body) = acme.publish(&server.base, &good).await;
    assert_eq!((status, body["unchanged"].clone()), (200, json!(true)));
    // SQL-shaped and odd searches are words, not code.
    for query in [
        "'; DROP TABLE apps; --",
        "app' OR '1'='1",
        "!!:* & | ( )",
        "%25_%25",
        "\\",
    ] {
        let (status, _) = get(
            &server.base,
            &format!(
                "/api/v1/search?q={}",
                query
                    .replace('%', "%25")
                    .replace('&', "%26")
                    .replace('#', "%23")
            ),
        )
        .await;
        assert_eq!(status, 200, "{query}");
    }
    assert_eq!(get(&server.base, "/api/v1/search?q=").await.0, 400);
    assert_eq!(get(&server.base, "/api/v1/apps/com.acme.none").await.0, 404);
    assert_eq!(
        get(&server.base, "/api/v1/apps").await.1,
        before,
        "nothing changed"
    );
}

#[tokio::test]
async fn two_server_processes_on_one_database_answer_the_same() {
    let pg = support::postgres();
    let url = pg.database();
    let pool = aai_registry::db::connect(&url, 2).await.expect("connect");
    let acme = Publisher::add(&pool, "acme", "com.acme").await;
    let mut servers = Vec::new();
    let mut logs = Vec::new();
    for _ in 0..2 {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aai-registry"))
            .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0"])
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("serve");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        let base = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("line") {
                if let Some(addr) = line.strip_prefix("aai-registry: serving on ") {
                    return addr.to_owned();
                }
            }
            panic!("the server ended before serving");
        })
        .await
        .expect("the server starts");
        // The rest of its log is read (a pipe nobody reads would fill, or break its writes).
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = kept.lock().expect("log");
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        logs.push(log);
        servers.push((child, base));
    }
    let (a, b) = (servers[0].1.clone(), servers[1].1.clone());
    for i in 0..20 {
        let text = descriptor(
            &format!("com.acme.app{i}"),
            &format!("Tool {i}"),
            "Handles invoices",
            &["send_invoice"],
            "1.0.0",
        );
        // Published through either; read through the other.
        let through = if i % 2 == 0 { &a } else { &b };
        assert_eq!(acme.publish(through, &text).await.0, 201);
    }
    for path in [
        "/api/v1/search?q=invoices&limit=50",
        "/api/v1/apps/com.acme.app7",
        "/api/v1/publishers/acme",
    ] {
        let (one, two) = (get(&a, path).await, get(&b, path).await);
        assert_eq!(one.0, 200, "{path}");
        assert_eq!(one, two, "{path}");
    }
    let listed_a = get(&a, "/api/v1/apps").await.1["apps"]
        .as_array()
        .map(Vec::len);
    assert_eq!(listed_a, Some(20));
    // The publisher's own tools: a key made by `keygen`, registered, then `publish`.
    let dir = tempfile::tempdir().expect("dir");
    let secret = dir.path().join("secret.key");
    let made = tokio::process::Command::new(env!("CARGO_BIN_EXE_aai-registry"))
        .arg("keygen")
        .arg(&secret)
        .output()
        .await
        .expect("keygen");
    assert!(made.status.success());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&secret)
            .expect("secret")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let public_key = String::from_utf8(made.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    let added = tokio::process::Command::new(env!("CARGO_BIN_EXE_aai-registry"))
        .args([
            "publisher",
            "add",
            "beta",
            "--namespace",
            "net.beta",
            "--key",
            &public_key,
            "--verify",
            "none",
            "--database-url",
            &url,
        ])
        .output()
        .await
        .expect("publisher add");
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let file = dir.path().join("aai.json");
    std::fs::write(
        &file,
        descriptor("net.beta.board", "Board", "Pin cards", &["pin"], "0.1.0"),
    )
    .expect("file");
    for (publisher, ok) in [("beta", true), ("acme", false)] {
        let published = tokio::process::Command::new(env!("CARGO_BIN_EXE_aai-registry"))
            .args(["publish", "--url", &b, "--publisher", publisher, "--key"])
            .arg(&secret)
            .arg(&file)
            .output()
            .await
            .expect("publish");
        assert_eq!(
            published.status.success(),
            ok,
            "{}",
            String::from_utf8_lossy(&published.stderr)
        );
    }
    assert_eq!(
        get(&a, "/api/v1/apps/net.beta.board").await.1["latest"],
        "0.1.0"
    );
}

/// A NUL byte in any input — the search words, an app id, a version, a publisher's name, and
/// each field of a publish request (the descriptor's text included) — is the caller's mistake:
/// 400 with the reason, never 503; nothing changes, and the server keeps serving.
#[tokio::test]
async fn nul_bytes_in_any_field_are_a_clear_400() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    let good = descriptor("com.acme.app", "App", "An app", &["go"], "1.0.0");
    assert_eq!(acme.publish(&server.base, &good).await.0, 201);
    let before = get(&server.base, "/api/v1/apps").await.1;
    for path in [
        "/api/v1/search?q=we%00ather",
        "/api/v1/search?q=%00",
        "/api/v1/search?q=app&limit=1%00",
        "/api/v1/apps/com.acme.%00app",
        "/api/v1/apps/com.acme.app/aai.json?version=1.0.0%00",
        "/api/v1/apps/com.acme%00.app/aai.json",
        "/api/v1/publishers/ac%00me",
    ] {
        let (status, body) = get(&server.base, path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains("NUL")),
            "{path}: {body}"
        );
    }
    let signature = aai_registry::keys::sign(&acme.secret, good.as_bytes()).expect("sign");
    let nul_descriptor = descriptor("com.acme.app", "App\u{0}", "An app", &["go"], "2.0.0");
    for body in [
        json!({"publisher": "ac\u{0}me", "descriptor": good, "signature": signature}),
        json!({"publisher": "acme", "descriptor": nul_descriptor, "signature": signature}),
        json!({"publisher": "acme", "descriptor": good, "signature": format!("{signature}\u{0}")}),
    ] {
        let (status, reply) = post(&server.base, &body.to_string()).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert!(
            reply["error"].as_str().is_some_and(|e| e.contains("NUL")),
            "{reply}"
        );
    }
    // Nothing changed, and the server still answers.
    assert_eq!(get(&server.base, "/api/v1/apps").await.1, before);
    let (status, found) = get(&server.base, "/api/v1/search?q=app").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(ids(&found), vec!["com.acme.app".to_owned()]);
}
