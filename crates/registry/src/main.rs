//! `aai-registry`: serve the app store, manage publishers, and sign and publish descriptors.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "aai-registry",
    version,
    about = "The AAI app store: a registry server on PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (stateless: run several against one database).
    Serve {
        /// e.g. postgres://user@localhost/aai or postgres:///aai?host=/run/postgresql
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        #[arg(long, default_value = "127.0.0.1:8470")]
        listen: String,
        /// How clients reach this registry (descriptor URLs are built from it); default
        /// `http://<listen>`.
        #[arg(long)]
        public_url: Option<String>,
        /// Connections in the pool.
        #[arg(long, default_value_t = 16)]
        max_connections: u32,
        /// A secret key file from `keygen` that signs a timestamp on every descriptor served,
        /// so clients can refuse copies older than they accept (a mirror holding back updates).
        #[arg(long, env = "AAI_REGISTRY_TIMESTAMP_KEY_FILE")]
        timestamp_key: Option<std::path::PathBuf>,
    },
    /// Bring the database's schema up to date and exit.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// Publishers (the registry's operator registers them with their public key).
    Publisher {
        #[command(subcommand)]
        action: PublisherAction,
    },
    /// Make a publisher key pair: the secret goes to FILE (0600), the public key is printed.
    Keygen { file: std::path::PathBuf },
    /// Sign a descriptor and publish it.
    Publish {
        #[command(flatten)]
        signer: Signer,
        descriptor: std::path::PathBuf,
    },
    /// Hand a publisher's apps to a new key: the current secret key signs the change, so
    /// clients that trusted the old key accept the new one.
    RotateKey {
        #[command(flatten)]
        signer: Signer,
        /// The new secret key file (from `keygen`).
        #[arg(long)]
        new_key: std::path::PathBuf,
    },
}

/// A publisher signing something it sends to a registry.
#[derive(Args)]
struct Signer {
    /// The registry, e.g. http://127.0.0.1:8470
    #[arg(long)]
    url: String,
    #[arg(long)]
    publisher: String,
    /// The publisher's current secret key file (from `keygen`).
    #[arg(long)]
    key: std::path::PathBuf,
}

#[derive(Subcommand)]
enum PublisherAction {
    /// Register (or re-key) a publisher that owns the appIds under NAMESPACE.
    Add {
        name: String,
        /// e.g. com.example: the publisher may publish com.example.* only.
        #[arg(long)]
        namespace: String,
        /// Its public key (base64), from `aai-registry keygen`.
        #[arg(long)]
        key: String,
        /// How the claim is proven before it is registered: `http` (the file
        /// https://<domain>/.well-known/aai-registry-auth), `dns` (a TXT record on the
        /// domain), each holding `v=AAIv1; k=ed25519; p=<key>`; or `none` when the operator
        /// vouches for the publisher.
        #[arg(long, value_enum)]
        verify: Verify,
        /// Send the well-known request here (e.g. http://127.0.0.1:8080) instead of
        /// https://<domain>; the Host header and path still name the domain.
        #[arg(long, env = "AAI_REGISTRY_WELL_KNOWN_BASE")]
        well_known_base: Option<String>,
        /// Ask this nameserver (IP:PORT) for the TXT record instead of the system's.
        #[arg(long, env = "AAI_REGISTRY_DNS_SERVER")]
        dns_server: Option<std::net::SocketAddr>,
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Verify {
    Http,
    Dns,
    None,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AAI_REGISTRY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(Cli::parse())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("aai-registry: {error:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            database_url,
            listen,
            public_url,
            max_connections,
            timestamp_key,
        } => {
            let timestamp_key = match timestamp_key {
                Some(path) => {
                    let secret = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    aai_registry::keys::public_of(&secret)?;
                    Some(secret.trim().to_owned())
                }
                None => None,
            };
            let pool = aai_registry::db::connect(&database_url, max_connections)
                .await
                .context("cannot open the database")?;
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            let addr = listener.local_addr()?;
            let public_url = public_url
                .unwrap_or_else(|| format!("http://{addr}"))
                .trim_end_matches('/')
                .to_owned();
            // The address, for whoever started it (port 0 picks one).
            eprintln!("aai-registry: serving on http://{addr}");
            tracing::info!(%addr, %public_url, "serving");
            let app = aai_registry::api::router(aai_registry::api::Api {
                pool,
                public_url,
                timestamp_key,
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
            Ok(())
        }
        Command::Migrate { database_url } => {
            aai_registry::db::connect(&database_url, 1).await?;
            eprintln!("aai-registry: the schema is up to date");
            Ok(())
        }
        Command::Publisher {
            action:
                PublisherAction::Add {
                    name,
                    namespace,
                    key,
                    verify,
                    well_known_base,
                    dns_server,
                    database_url,
                },
        } => {
            aai_registry::keys::public(&key)?;
            anyhow::ensure!(
                aai_descriptor::is_valid_app_id(&format!("{namespace}.x")),
                "--namespace {namespace:?} is not a reverse-DNS prefix like com.example"
            );
            let method = match verify {
                Verify::Http => Some(aai_registry::claims::Method::Http),
                Verify::Dns => Some(aai_registry::claims::Method::Dns),
                Verify::None => None,
            };
            let proof = match method {
                Some(method) => {
                    let check = aai_registry::claims::Check {
                        well_known_base,
                        dns_server,
                        ..aai_registry::claims::Check::default()
                    };
                    let proof = aai_registry::claims::verify(&namespace, &key, method, &check)
                        .await
                        .map_err(|reason| {
                            anyhow::anyhow!(
                                "the claim of {name} to {namespace} is not proven ({}): {reason}; publish `{}` there",
                                method.name(),
                                aai_registry::claims::record(&key)
                            )
                        })?;
                    format!("proven by {proof}")
                }
                None => "vouched for by the operator (--verify none)".to_owned(),
            };
            let pool = aai_registry::db::connect(&database_url, 1).await?;
            aai_registry::db::add_publisher(
                &pool,
                &aai_registry::db::Publisher {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    public_key: key,
                },
            )
            .await?;
            eprintln!("aai-registry: publisher {name} owns {namespace}.*, {proof}");
            Ok(())
        }
        Command::Keygen { file } => {
            let (secret, public) = aai_registry::keys::generate();
            write_secret(&file, &secret)?;
            #[allow(clippy::print_stdout)]
            {
                println!("{public}");
            }
            Ok(())
        }
        Command::Publish {
            signer:
                Signer {
                    url,
                    publisher,
                    key,
                },
            descriptor,
        } => {
            let text = read(&descriptor)?;
            let secret = read(&key)?;
            let signature = aai_registry::keys::sign(&secret, text.as_bytes())?;
            let body = serde_json::json!({"publisher": publisher, "descriptor": text, "signature": signature});
            let response = post_json(
                &format!("{}/api/v1/apps", url.trim_end_matches('/')),
                &body.to_string(),
            )
            .await?;
            eprintln!("aai-registry: {response}");
            Ok(())
        }
        Command::RotateKey {
            signer:
                Signer {
                    url,
                    publisher,
                    key,
                },
            new_key,
        } => {
            let secret = read(&key)?;
            let old = aai_registry::keys::public_of(&secret)?;
            let new = aai_registry::keys::public_of(&read(&new_key)?)?;
            let statement = aai_descriptor::statements::key_rotation(&publisher, &old, &new);
            let signature = aai_registry::keys::sign(&secret, &statement)?;
            let body = serde_json::json!({"new_key": new, "signature": signature});
            let response = post_json(
                &format!(
                    "{}/api/v1/publishers/{}/rotations",
                    url.trim_end_matches('/'),
                    percent_encoding::utf8_percent_encode(
                        &publisher,
                        percent_encoding::NON_ALPHANUMERIC
                    )
                ),
                &body.to_string(),
            )
            .await?;
            eprintln!("aai-registry: {response}");
            Ok(())
        }
    }
}

fn read(path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn write_secret(path: &std::path::Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))?;
    file.write_all(secret.as_bytes())?;
    Ok(())
}

/// A plain HTTP/1.1 POST to a loopback or LAN registry; the status line and body.
async fn post_json(url: &str, body: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url
        .strip_prefix("http://")
        .context("`publish --url` takes an http:// URL (put TLS in front of the registry for remote publishers)")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut tcp = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("cannot reach {host}"))?;
    tcp.write_all(
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await?;
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).await?;
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.contains(" 20"), "{status}: {body}");
    Ok(format!("{status}: {body}"))
}
