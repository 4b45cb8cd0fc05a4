//! What the registry guarantees about ownership and order, against a real PostgreSQL, a real
//! HTTP server and a real DNS server (dnsmasq): "latest" is the highest version by semver;
//! an app id belongs to the publisher of the longest namespace above it and an app to its
//! first publisher; namespace claims are proven by a well-known file or a DNS TXT record; and
//! the typo search is served by its trigram index whatever plan PostgreSQL picks.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use aai_registry::claims::{self, Check, Method};
use aai_test_support::http::{Request, Response, TestServer};
use aai_test_support::postgres as support;
use common::{Publisher, get, registry};
use serde_json::{Value, json};

fn descriptor(app_id: &str, description: &str, tools: &[&str], version: &str) -> String {
    json!({
        "schema_version": "1.0", "appId": app_id, "name": "Forecast", "description": description,
        "version": version, "aliases": [],
        "platforms": {"web": {"automation": "restapi", "base_url": "https://api.example.com", "auth": {"type": "none"},
            "tools": tools.iter().map(|t| json!({"name": t, "description": format!("{t} things"), "endpoint": format!("/{t}")})).collect::<Vec<_>>()}}
    })
    .to_string()
}

fn error(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

fn versions(details: &Value) -> Vec<&str> {
    details["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["version"].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn latest_is_the_highest_version_by_semver_never_the_last_published() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    let id = "com.acme.weather";
    let text = |description: &str, tool: &str, version: &str| {
        descriptor(id, description, &["forecast", tool], version)
    };
    let v110 = text("Rain radar and storm warnings", "radar", "1.1.0");
    for t in [
        text("Sunny forecasts", "sunshine", "1.0.0"),
        v110.clone(),
        // A fix on an older line: kept, never latest.
        text("Hailstone almanac", "hailstones", "0.9.0"),
    ] {
        let (status, body) = acme.publish(&server.base, &t).await;
        assert_eq!(status, 201, "{body}");
    }
    let (_, details) = get(&server.base, &format!("/api/v1/apps/{id}")).await;
    assert_eq!(details["latest"], "1.1.0", "{details}");
    assert_eq!(details["description"], "Rain radar and storm warnings");
    assert_eq!(details["tools"], json!(["forecast", "radar"]));
    assert_eq!(versions(&details), ["1.1.0", "1.0.0", "0.9.0"]);
    // Search reads 1.1.0's words, not 0.9.0's.
    let (_, found) = get(&server.base, "/api/v1/search?q=radar").await;
    assert_eq!(found["results"][0]["appId"], id, "{found}");
    assert_eq!(found["results"][0]["version"], "1.1.0");
    let (_, found) = get(&server.base, "/api/v1/search?q=hailstones").await;
    assert_eq!(found["results"], json!([]), "{found}");
    // The descriptor without a version is 1.1.0's exact bytes.
    let response = reqwest::get(format!("{}/api/v1/apps/{id}/aai.json", server.base))
        .await
        .expect("descriptor");
    assert_eq!(response.headers()["x-aai-version"], "1.1.0");
    assert_eq!(response.text().await.expect("text"), v110);

    // Pre-releases sort below their release and above the release before (semver §11).
    for (version, latest) in [
        ("1.2.0-beta.1", "1.2.0-beta.1"),
        ("1.2.0", "1.2.0"),
        ("1.2.0-rc.1", "1.2.0"),
        ("1.1.1", "1.2.0"),
    ] {
        let (status, body) = acme
            .publish(&server.base, &text("Storms", "radar", version))
            .await;
        assert_eq!(status, 201, "{version}: {body}");
        let (_, details) = get(&server.base, &format!("/api/v1/apps/{id}")).await;
        assert_eq!(details["latest"], latest, "after {version}");
    }
    let (_, details) = get(&server.base, &format!("/api/v1/apps/{id}")).await;
    assert_eq!(
        versions(&details),
        [
            "1.2.0",
            "1.2.0-rc.1",
            "1.2.0-beta.1",
            "1.1.1",
            "1.1.0",
            "1.0.0",
            "0.9.0"
        ]
    );

    // Versions that are not semver are refused with the reason, and change nothing.
    for version in ["1.0", "v2.0.0", "latest", "2.0.0.1", "02.0.0"] {
        let (status, body) = acme
            .publish(&server.base, &text("Bad", "radar", version))
            .await;
        assert_eq!(status, 400, "{version}: {body}");
        assert!(error(&body).contains("not a semantic version"), "{body}");
    }
    // Build metadata does not order versions, so it cannot make a second 1.2.0.
    let (status, body) = acme
        .publish(&server.base, &text("Other", "radar", "1.2.0+build.7"))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(error(&body).contains("build metadata"), "{body}");
    let (_, after) = get(&server.base, &format!("/api/v1/apps/{id}")).await;
    assert_eq!(after, details);
}

#[tokio::test]
async fn an_app_id_belongs_to_the_longest_namespace_above_it() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    let acmelabs = Publisher::add(&server.pool, "acmelabs", "com.acme.labs").await;
    let tool = "com.acme.labs.tool";
    assert_eq!(
        acmelabs
            .publish(
                &server.base,
                &descriptor(tool, "Lab tool", &["run"], "1.0.0")
            )
            .await
            .0,
        201
    );
    // The owner of the broader namespace can neither publish a version of the nested app nor
    // create new ids under the nested namespace.
    for (id, version) in [(tool, "2.0.0"), ("com.acme.labs.brandnew", "1.0.0")] {
        let (status, body) = acme
            .publish(
                &server.base,
                &descriptor(id, "Takeover", &["upload_home"], version),
            )
            .await;
        assert_eq!(status, 403, "{id}: {body}");
        assert!(
            error(&body).contains("com.acme.labs.* belongs to publisher acmelabs"),
            "{body}"
        );
    }
    // A namespace is a whole label: com.acmefoo is not below com.acme.
    let (status, body) = acme
        .publish(
            &server.base,
            &descriptor("com.acmefoo.x", "Foo", &["run"], "1.0.0"),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(error(&body).contains("no publisher owns"), "{body}");
    // The nested namespace's owner can do both; the broader one keeps its own ids.
    for (who, id, version) in [
        (&acmelabs, tool, "2.0.0"),
        (&acmelabs, "com.acme.labs.brandnew", "1.0.0"),
        (&acme, "com.acme.x", "1.0.0"),
    ] {
        let (status, body) = who
            .publish(&server.base, &descriptor(id, "Mine", &["run"], version))
            .await;
        assert_eq!(status, 201, "{id}: {body}");
    }
    let (_, details) = get(&server.base, &format!("/api/v1/apps/{tool}")).await;
    assert_eq!(
        (
            details["latest"].clone(),
            details["publisher"]["name"].clone()
        ),
        (json!("2.0.0"), json!("acmelabs"))
    );

    // A namespace already held is refused, and so is one below which another publisher's
    // apps already live (they would change hands).
    let (_, key) = aai_registry::keys::generate();
    let add = |name: &str, namespace: &str| aai_registry::db::Publisher {
        name: name.into(),
        namespace: namespace.into(),
        public_key: key.clone(),
    };
    let refused = aai_registry::db::add_publisher(&server.pool, &add("squatter", "com.acme.labs"))
        .await
        .expect_err("held");
    assert!(
        refused
            .to_string()
            .contains("belongs to publisher acmelabs"),
        "{refused}"
    );
    assert_eq!(
        acme.publish(
            &server.base,
            &descriptor("com.acme.shop.cart", "Cart", &["buy"], "1.0.0")
        )
        .await
        .0,
        201
    );
    let refused = aai_registry::db::add_publisher(&server.pool, &add("shop", "com.acme.shop"))
        .await
        .expect_err("apps of acme below");
    assert!(
        refused
            .to_string()
            .contains("com.acme.shop.cart (publisher acme)"),
        "{refused}"
    );
    // A namespace with no other publisher's app below it is free to register, even below
    // another's.
    aai_registry::db::add_publisher(&server.pool, &add("deep", "com.acme.labs.deep"))
        .await
        .expect("nothing lives below com.acme.labs.deep");
    assert!(
        aai_registry::db::publisher(&server.pool, "shop")
            .await
            .expect("db")
            .is_none()
    );
}

#[tokio::test]
async fn only_an_apps_publisher_publishes_its_versions() {
    let server = registry(None).await;
    let acme = Publisher::add(&server.pool, "acme", "com.acme").await;
    let labs = Publisher::add(&server.pool, "acmelabs", "com.acme.labs").await;
    let tool = "com.acme.labs.tool";
    assert_eq!(
        labs.publish(
            &server.base,
            &descriptor(tool, "Lab tool", &["run"], "1.0.0")
        )
        .await
        .0,
        201
    );
    // acmelabs moves to another namespace: its app now lies under acme's com.acme, but it is
    // still acmelabs's app, and acme cannot publish versions of it.
    let (_, key) = aai_registry::keys::generate();
    aai_registry::db::add_publisher(
        &server.pool,
        &aai_registry::db::Publisher {
            name: "acmelabs".into(),
            namespace: "org.labs".into(),
            public_key: key,
        },
    )
    .await
    .expect("move");
    let (status, body) = acme
        .publish(
            &server.base,
            &descriptor(tool, "Takeover", &["upload_home"], "9.0.0"),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        error(&body).contains("belongs to publisher acmelabs"),
        "{body}"
    );
    let (_, details) = get(&server.base, &format!("/api/v1/apps/{tool}")).await;
    assert_eq!(details["latest"], "1.0.0");
    assert_eq!(versions(&details), ["1.0.0"]);
    // acme can still re-key its own namespace although acmelabs's app lies below it (nothing
    // changes hands), but no newcomer can take the namespace the app lies in.
    let (_, rekey) = aai_registry::keys::generate();
    let again = |name: &str, namespace: &str| aai_registry::db::Publisher {
        name: name.into(),
        namespace: namespace.into(),
        public_key: rekey.clone(),
    };
    aai_registry::db::add_publisher(&server.pool, &again("acme", "com.acme"))
        .await
        .expect("re-key");
    let refused = aai_registry::db::add_publisher(&server.pool, &again("newlabs", "com.acme.labs"))
        .await
        .expect_err("acmelabs's app lies there");
    assert!(
        refused
            .to_string()
            .contains("com.acme.labs.tool (publisher acmelabs)"),
        "{refused}"
    );
}

/// The public key's record as the well-known file holds it, served only for `domain`.
fn well_known(domain: &'static str, body: Option<String>) -> TestServer {
    TestServer::http(move |request: &Request| match &body {
        Some(body)
            if request.path() == claims::WELL_KNOWN_PATH
                && request.header("host") == Some(domain) =>
        {
            Response::new(200, body.clone()).header("content-type", "text/plain")
        }
        _ => Response::new(404, "not found"),
    })
}

fn check_http(server: &TestServer) -> Check {
    Check {
        well_known_base: Some(server.url()),
        ..Check::default()
    }
}

#[tokio::test]
async fn a_claim_is_proven_by_the_domains_well_known_file() {
    let (_, key) = aai_registry::keys::generate();
    let (_, other) = aai_registry::keys::generate();
    let right = well_known(
        "labs.acme.com",
        Some(format!("# acme labs\n{}\n", claims::record(&key))),
    );
    let proof = claims::verify("com.acme.labs", &key, Method::Http, &check_http(&right))
        .await
        .expect("the right key passes");
    assert_eq!(proof, "https://labs.acme.com/.well-known/aai-registry-auth");
    let seen = right.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("host"), Some("labs.acme.com"));
    // The file names the namespace's own domain: com.acme's file does not prove com.acme.labs.
    let refused = claims::verify("com.acme", &key, Method::Http, &check_http(&right))
        .await
        .expect_err("other domain")
        .to_string();
    assert!(refused.contains("404"), "{refused}");

    let wrong = well_known("labs.acme.com", Some(claims::record(&other)));
    let refused = claims::verify("com.acme.labs", &key, Method::Http, &check_http(&wrong))
        .await
        .expect_err("wrong key")
        .to_string();
    assert!(refused.contains("another key"), "{refused}");
    let missing = well_known("labs.acme.com", None);
    let refused = claims::verify("com.acme.labs", &key, Method::Http, &check_http(&missing))
        .await
        .expect_err("missing file")
        .to_string();
    assert!(refused.contains("404"), "{refused}");
    // A redirect could hand the answer to any host: not followed.
    let elsewhere = TestServer::http(move |_: &Request| {
        Response::new(302, "").header("location", "http://127.0.0.1:9/aai-registry-auth")
    });
    let refused = claims::verify("com.acme.labs", &key, Method::Http, &check_http(&elsewhere))
        .await
        .expect_err("redirect")
        .to_string();
    assert!(refused.contains("302"), "{refused}");

    // The operator's command checks before it registers, and says why it refuses.
    let pg = support::postgres();
    let url = pg.database();
    for (server, ok) in [(&wrong, false), (&missing, false), (&right, true)] {
        let added = Command::new(env!("CARGO_BIN_EXE_aai-registry"))
            .args([
                "publisher",
                "add",
                "acmelabs",
                "--namespace",
                "com.acme.labs",
            ])
            .args(["--key", &key, "--verify", "http", "--database-url", &url])
            .env("AAI_REGISTRY_WELL_KNOWN_BASE", server.url())
            .output()
            .expect("publisher add");
        let stderr = String::from_utf8_lossy(&added.stderr);
        assert_eq!(added.status.success(), ok, "{stderr}");
        if !ok {
            assert!(stderr.contains("is not proven (http)"), "{stderr}");
            assert!(stderr.contains(&claims::record(&key)), "{stderr}");
        }
    }
    let pool = aai_registry::db::connect(&url, 1).await.expect("connect");
    let registered = aai_registry::db::publisher(&pool, "acmelabs")
        .await
        .expect("db")
        .expect("registered once proven");
    assert_eq!(registered.public_key, key);
}

/// A real DNS server on loopback answering TXT records for `acme.com` (and NXDOMAIN for every
/// other name in it); it stops when dropped.
struct Dns {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Dns {
    fn start(records: &[(&str, String)]) -> Self {
        let binary = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("dnsmasq is not installed: apt-get install -y dnsmasq-base");
        // A port that was free a moment ago; another process taking it in between fails the
        // start, which is retried with a new one.
        for _ in 0..5 {
            let port = std::net::UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.local_addr())
                .expect("a free port")
                .port();
            let mut command = Command::new(binary);
            command.args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                "--pid-file=",
                "--log-facility=-",
                "--local=/acme.com/",
                &format!("--port={port}"),
            ]);
            for (name, text) in records {
                command.arg(format!("--txt-record={name},{text}"));
            }
            let mut child = command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dnsmasq");
            let stderr = child.stderr.take().expect("stderr");
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                let mut log = String::new();
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log.push_str(&line);
                    log.push('\n');
                    // dnsmasq logs "started" once its sockets are bound.
                    if line.contains("started, version")
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(Ok(()));
                    }
                }
                if let Some(tx) = tx.take() {
                    let _ = tx.send(Err(log));
                }
            });
            match rx.recv_timeout(std::time::Duration::from_secs(20)) {
                Ok(Ok(())) => {
                    return Self {
                        child,
                        addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                    };
                }
                Ok(Err(log)) if log.contains("in use") => {
                    let _ = child.wait();
                }
                other => {
                    let _ = child.kill();
                    panic!("dnsmasq did not start: {other:?}");
                }
            }
        }
        panic!("dnsmasq found no free port in 5 tries");
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_claim_is_proven_by_a_dns_txt_record() {
    let (_, key) = aai_registry::keys::generate();
    let (_, other) = aai_registry::keys::generate();
    let dns = Dns::start(&[
        ("labs.acme.com", claims::record(&key)),
        ("labs.acme.com", "google-site-verification=abc".to_owned()),
        ("wrong.acme.com", claims::record(&other)),
    ]);
    let check = Check {
        dns_server: Some(dns.addr),
        ..Check::default()
    };
    let proof = claims::verify("com.acme.labs", &key, Method::Dns, &check)
        .await
        .expect("the right TXT record passes");
    assert!(proof.contains("labs.acme.com"), "{proof}");
    let refused = claims::verify("com.acme.wrong", &key, Method::Dns, &check)
        .await
        .expect_err("wrong key")
        .to_string();
    assert!(refused.contains("another key"), "{refused}");
    let refused = claims::verify("com.acme.missing", &key, Method::Dns, &check)
        .await
        .expect_err("no record")
        .to_string();
    assert!(refused.contains("no TXT record"), "{refused}");

    let pg = support::postgres();
    let url = pg.database();
    for (name, namespace, ok) in [
        ("wrong", "com.acme.wrong", false),
        ("missing", "com.acme.missing", false),
        ("acmelabs", "com.acme.labs", true),
    ] {
        let added = Command::new(env!("CARGO_BIN_EXE_aai-registry"))
            .args(["publisher", "add", name, "--namespace", namespace])
            .args(["--key", &key, "--verify", "dns", "--database-url", &url])
            .args(["--dns-server", &dns.addr.to_string()])
            .output()
            .expect("publisher add");
        let stderr = String::from_utf8_lossy(&added.stderr);
        assert_eq!(added.status.success(), ok, "{namespace}: {stderr}");
        if !ok {
            assert!(stderr.contains("is not proven (dns)"), "{stderr}");
        }
    }
    let pool = aai_registry::db::connect(&url, 1).await.expect("connect");
    for (name, registered) in [("wrong", false), ("missing", false), ("acmelabs", true)] {
        let found = aai_registry::db::publisher(&pool, name).await.expect("db");
        assert_eq!(found.is_some(), registered, "{name}");
    }
}

/// 10,000 apps laid out as `db::publish` lays them out (the bench's apps: a name, an alias
/// of two words, two tools), inserted in one statement rather than published one by one.
const TEN_THOUSAND_APPS: &str = "
WITH w AS (SELECT ARRAY['mail','calendar','music','invoice','photo','notes','tasks','chat',
    'video','maps','weather','bank','budget','travel','recipe','fitness','code','deploy','ticket',
    'crm','contacts','drive','backup','scanner','printer','reader','podcast','radio','news',
    'stocks'] a),
g AS (SELECT i, (SELECT a[1 + i % 30] FROM w) w1, (SELECT a[1 + (i / 30) % 30] FROM w) w2
      FROM generate_series(0, 9999) i)
INSERT INTO apps (app_id, publisher, name, description, aliases, tools, platforms, latest, words, doc)
SELECT 'org.bench.app' || i, 'bench', 'App' || i || ' ' || w1,
  'Manage your ' || w1 || ' and ' || w2 || ' from one place, number ' || i,
  ARRAY[w1 || ' ' || w2], ARRAY['list_' || w1, 'send_' || w2], ARRAY['web'], '1.0.0',
  lower('app' || i || ' App' || i || ' ' || w1 || ' ' || w1 || ' ' || w2 || ' list_' || w1 || ' send_' || w2),
  setweight(to_tsvector('english', 'App' || i || ' ' || w1 || ' org bench app' || i), 'A')
  || setweight(to_tsvector('english', w1 || ' ' || w2), 'A')
  || setweight(to_tsvector('english', 'list ' || w1 || ' send ' || w2), 'B')
  || setweight(to_tsvector('english', 'Manage your ' || w1 || ' and ' || w2 || ' from one place, number ' || i), 'C')
FROM g";

/// The typo pass reads the trigram index for every query shape, under custom plans, generic
/// plans, and PostgreSQL's own choice after 10 executions of the prepared statement — asserted
/// on the plan, not on time (the times are in bench/RESULTS.md).
#[tokio::test]
async fn the_typo_search_uses_its_trigram_index_at_any_plan() {
    let server = registry(None).await;
    let bench = Publisher::add(&server.pool, "bench", "org.bench").await;
    for i in 0..3 {
        let text = descriptor(
            &format!("org.bench.real{i}"),
            "Weather radar",
            &["forecast"],
            "1.0.0",
        );
        assert_eq!(bench.publish(&server.base, &text).await.0, 201);
    }
    sqlx::raw_sql(TEN_THOUSAND_APPS)
        .execute(&server.pool)
        .await
        .expect("10,000 apps");
    sqlx::raw_sql("ANALYZE apps")
        .execute(&server.pool)
        .await
        .expect("analyze");

    // No word a typo can be found in: no typo pass at all (full text still answers).
    for shape in ["ma", "!!!", "a b c", "-- ;", "x"] {
        assert_eq!(aai_registry::db::typo_words(shape), "", "{shape}");
    }
    let long = "calendar invoice photo music weather budget travel "
        .repeat(4)
        .chars()
        .take(200)
        .collect::<String>();
    let shapes = [
        "mail",
        "phto",
        "mail calendar",
        "app37 mail",
        "calender invoce",
        "org.bench.app123",
        "ma photo",
        "zzzzzzzzzz",
        long.as_str(),
    ];
    let mut conn = server.pool.acquire().await.expect("connection");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "PREPARE typo(text, bigint, text[]) AS {}",
        aai_registry::db::TYPO_SEARCH
    )))
    .execute(&mut *conn)
    .await
    .expect("prepare");
    for mode in ["force_custom_plan", "force_generic_plan", "auto"] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET plan_cache_mode = {mode}")))
            .execute(&mut *conn)
            .await
            .expect("mode");
        for shape in shapes {
            let words = aai_registry::db::typo_words(shape);
            assert!(!words.is_empty(), "{shape}");
            // EXECUTE takes no bind parameters: the words go in as a literal quoted by
            // PostgreSQL itself.
            let literal: String = sqlx::query_scalar("SELECT quote_literal($1)")
                .bind(&words)
                .fetch_one(&mut *conn)
                .await
                .expect("quote");
            let execute = format!("EXECUTE typo({literal}, 20, '{{}}')");
            for _ in 0..10 {
                sqlx::raw_sql(sqlx::AssertSqlSafe(execute.clone()))
                    .execute(&mut *conn)
                    .await
                    .expect("execute");
            }
            let plan: Vec<String> =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN {execute}")))
                    .fetch_all(&mut *conn)
                    .await
                    .expect("explain");
            let plan = plan.join("\n");
            assert!(
                plan.contains("Bitmap Index Scan on apps_words") && !plan.contains("Seq Scan"),
                "{mode}, {shape:?}: {plan}"
            );
        }
    }
    // And the search answers through it: an app id finds its app first, not every app of
    // its namespace by the shared `org` and `bench`.
    let (_, found) = get(&server.base, "/api/v1/search?q=org.bench.app123").await;
    assert_eq!(found["results"][0]["appId"], "org.bench.app123", "{found}");
    let (_, found) = get(&server.base, "/api/v1/search?q=forcast").await;
    assert_eq!(found["results"][0]["appId"], "org.bench.real0", "{found}");
}
