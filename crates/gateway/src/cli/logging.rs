//! Where the gateway's logs go.

/// Lines a background writer holds before it drops new ones. Its queue is allocated whole
/// at start-up (the default, 128,000 lines, is megabytes; 512 lines are 16 KiB).
const LINES: usize = 512;

/// Logs go to stderr through a lossy background writer: a client that never reads our
/// stderr must not be able to stall the server, so lines are dropped instead. In server mode
/// they also go to `AAI_HOME/logs/aai-gateway.log`, rotated at 10 MB (3 files kept). No
/// colours: the subscriber is built without them, and escape codes do not belong in files.
pub fn init(
    filter: &str,
    log_home: Option<&std::path::Path>,
) -> Vec<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LINES)
        .finish(std::io::stderr());
    let mut guards = vec![guard];
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false);
    let file = log_home.and_then(|home| {
        let file = crate::cli::logfile::SizeRotating::open(&home.join("logs"), "aai-gateway.log")
            .map_err(|error| eprintln!("aai-gateway: no log file: {error}"))
            .ok()?;
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(LINES)
            .finish(file);
        guards.push(guard);
        Some(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false)
                .with_target(false)
                .boxed(),
        )
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file)
        .init();
    guards
}
