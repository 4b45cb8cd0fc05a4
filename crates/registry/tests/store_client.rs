//! `aai-gateway store` against a real registry on a real PostgreSQL: search, a verified
//! install, an update with its permission diff, a publisher key that changed (refused), the
//! install hint of APP_NOT_FOUND, and uninstall.

mod common;

use common::{GatewayOnStdio, Publisher, cli, registry};
use serde_json::json;

fn app(version: &str, tools: &[(&str, &str)]) -> String {
    json!({
        "schema_version": "1.0", "appId": "com.acme.tasks", "name": "Acme Tasks", "description": "Keep track of tasks",
        "version": version, "aliases": ["todo"],
        "platforms": {"web": {"automation": "restapi", "base_url": "https://tasks.acme.example", "auth": {"type": "none"},
            "tools": tools.iter().map(|(t, risk)| json!({"name": t, "description": t, "endpoint": format!("/{t}"), "risk": risk})).collect::<Vec<_>>()}}
    })
    .to_string()
}

#[tokio::test]
async fn install_update_and_uninstall_from_the_store() {
    let registry = registry(None).await;
    let base = registry.base.clone();
    let acme = Publisher::add(&registry.pool, "acme", "com.acme").await;
    let v1 = app("1.0.0", &[("list_tasks", "low"), ("add_task", "medium")]);
    acme.publish_ok(&base, &v1).await;

    let home = tempfile::tempdir().expect("home");
    let home = home.path();
    std::fs::write(
        home.join("config.json"),
        json!({"store": {"url": base}}).to_string(),
    )
    .expect("config");
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        let v1 = v1.clone();
        move || {
            let (ok, out, err) = cli(&home, &["store", "search", "taks"], &[]);
            assert!(
                ok && out.contains("com.acme.tasks 1.0.0 — Acme Tasks"),
                "{out}{err}"
            );
            // Nobody at a terminal and no --yes: nothing is written.
            let (ok, _, err) = cli(&home, &["store", "install", "com.acme.tasks"], &[]);
            assert!(!ok && err.contains("--yes"), "{err}");
            assert!(!home.join("store/apps/com.acme.tasks").exists());
            // The install hint before it is installed.
            let (ok, out, _) = cli(&home, &["store", "refresh"], &[]);
            assert!(ok && out.contains("1 app(s)"), "{out}");
            let (ok, _, err) = cli(&home, &["call", "com.acme.tasks", "list_tasks"], &[]);
            assert!(
                !ok && err.contains("aai-gateway store install com.acme.tasks"),
                "{err}"
            );
            let (ok, out, err) = cli(&home, &["store", "install", "com.acme.tasks", "--yes"], &[]);
            assert!(ok, "{out}{err}");
            assert!(
                out.contains("signature verified") && out.contains("add_task (risk medium)"),
                "{out}"
            );
            assert_eq!(
                std::fs::read_to_string(home.join("store/apps/com.acme.tasks/aai.json"))
                    .expect("installed"),
                v1
            );
            let (ok, out, _) = cli(&home, &["--scan"], &[]);
            assert!(ok && out.contains("com.acme.tasks"), "{out}");
        }
    })
    .await
    .expect("cli");

    // A new version: the update shows what changes.
    acme.publish_ok(
        &base,
        &app(
            "1.1.0",
            &[
                ("list_tasks", "low"),
                ("add_task", "high"),
                ("delete_task", "high"),
            ],
        ),
    )
    .await;
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        move || {
            let (ok, out, err) = cli(&home, &["store", "update", "--yes"], &[]);
            assert!(ok, "{out}{err}");
            assert!(
                out.contains("1.0.0 → 1.1.0")
                    && out.contains("+ web delete_task (risk high)")
                    && out.contains("~ web add_task: risk medium → high"),
                "{out}"
            );
            let (_, out, _) = cli(&home, &["store", "list"], &[]);
            assert!(out.contains("com.acme.tasks 1.1.0"), "{out}");
        }
    })
    .await
    .expect("cli");

    // The registry now hands out another key for acme: the pinned one wins, nothing changes.
    let rekeyed = Publisher::add(&registry.pool, "acme", "com.acme").await;
    rekeyed
        .publish_ok(&base, &app("2.0.0", &[("wipe_everything", "critical")]))
        .await;
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        move || {
            let (ok, _, err) = cli(&home, &["store", "update", "--yes"], &[]);
            assert!(!ok && err.contains("another key"), "{err}");
            assert!(
                std::fs::read_to_string(home.join("store/apps/com.acme.tasks/aai.json"))
                    .expect("kept")
                    .contains("1.1.0")
            );
            let (ok, out, err) = cli(&home, &["store", "uninstall", "com.acme.tasks"], &[]);
            assert!(
                ok && out.contains("removed com.acme.tasks 1.1.0"),
                "{out}{err}"
            );
            assert!(!home.join("store/apps/com.acme.tasks").exists());
            let (ok, _, err) = cli(&home, &["store", "uninstall", "com.acme.tasks"], &[]);
            assert!(!ok && err.contains("not installed from the store"), "{err}");
        }
    })
    .await
    .expect("cli");
}

#[tokio::test]
async fn a_running_gateway_lists_store_apps_and_offers_an_install_at_once() {
    let registry = registry(None).await;
    let base = registry.base.clone();
    let acme = Publisher::add(&registry.pool, "acme", "com.acme").await;
    acme.publish_ok(&base, &app("1.0.0", &[("list_tasks", "low")]))
        .await;
    let home = tempfile::tempdir().expect("home");
    let home = home.path().to_path_buf();
    std::fs::write(
        home.join("config.json"),
        json!({"store": {"url": base, "in_apps": true}}).to_string(),
    )
    .expect("config");
    tokio::task::spawn_blocking(move || {
        let mut gateway = GatewayOnStdio::start(&home);
        // The index is read in the background after start: the store's app appears as not
        // installed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut listed = gateway.apps("tasks");
        while !listed.contains("com.acme.tasks — Acme Tasks (not installed") {
            assert!(
                std::time::Instant::now() < deadline,
                "the store's app was never listed: {listed}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
            listed = gateway.apps("tasks");
        }
        gateway.seen.clear();
        let (ok, out, err) = cli(&home, &["store", "install", "com.acme.tasks", "--yes"], &[]);
        assert!(ok, "{out}{err}");
        // Offered as installed, and the client was told the list changed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut listed = gateway.apps("tasks");
        while listed.contains("(not installed") || !listed.contains("com.acme.tasks") {
            assert!(
                std::time::Instant::now() < deadline,
                "the installed app was not offered: {listed}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
            listed = gateway.apps("tasks");
        }
        assert!(
            gateway
                .seen
                .iter()
                .any(|m| m == "notifications/tools/list_changed")
                || gateway.notified("notifications/tools/list_changed"),
            "no list_changed after the install"
        );
    })
    .await
    .expect("gateway");
}
