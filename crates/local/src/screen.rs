//! The screen toolset (`local.screen`): `screenshot`, `screen_ocr`, `element_locate`.
//!
//! Images are scaled to the agent's space (see [`crate::desktop`]) and returned as MCP image
//! content; they are never written anywhere (the audit log keeps size and hash only).
//! Windows of protected apps are blacked out before anything leaves the gateway.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use base64::Engine as _;
use image::{ImageEncoder, RgbImage};
use serde_json::{Map, Value, json};

use crate::desktop::backend::Desktop;
use crate::desktop::x11::X11;
use crate::desktop::{DesktopConfig, Rect, Space, rect_arg};
use crate::{Call, Setup, Toolset, ocr};

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| crate::shipped("local.screen", include_str!("../toolsets/screen.aai.json")));

/// How often a settling screen is looked at.
const SETTLE_EVERY: Duration = Duration::from_millis(50);
/// Largest image `screen_ocr`/`element_locate` accept from the agent (decoded bytes).
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The screen toolset.
pub struct Screen {
    config: DesktopConfig,
    desktop: Arc<Desktop>,
}

impl Screen {
    pub fn new(setup: &Setup) -> Self {
        Self {
            config: setup.desktop.clone(),
            desktop: setup.display.clone(),
        }
    }
}

impl Toolset for Screen {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            match call.tool {
                "screenshot" => {
                    let (desktop, config, args) =
                        (self.desktop.clone(), self.config.clone(), call.args.clone());
                    blocking(move || screenshot(&*desktop.x11()?, &config, &args)).await
                }
                "screen_ocr" => self.ocr(call.args).await,
                "element_locate" => self.locate(call.args).await,
                other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
            }
        })
    }

    fn waits_ms(&self, tool: &str, args: &Map<String, Value>) -> u64 {
        match tool {
            "screenshot" => args.get("settle_ms").and_then(Value::as_u64).unwrap_or(0),
            _ => 0,
        }
    }

    fn doctor(&self) -> BoxFuture<'_, Vec<crate::Check>> {
        Box::pin(async move {
            let desktop = self.desktop.clone();
            let display = blocking(move || Ok(desktop.describe()))
                .await
                .unwrap_or_else(|e| Err(e.message));
            let ocr = ocr::installed(&self.config.ocr_language).await;
            let a11y = crate::a11y::reachable(&self.desktop).await;
            let check = |tool: &str, result: Result<String, String>| match result {
                Ok(backend) => crate::Check::ok(tool, backend),
                Err(problem) => crate::Check::failed(tool, problem),
            };
            let ocr_line = match (&display, &ocr) {
                (Ok(d), Ok(o)) => Ok(format!("{o} on {d}")),
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
            };
            let locate = match (&display, &a11y, &ocr) {
                (Err(e), _, _) => Err(e.clone()),
                (Ok(_), Ok(a), Ok(o)) => Ok(format!("{a}, then {o}")),
                (Ok(_), Ok(a), Err(_)) => {
                    Ok(format!("{a} (no OCR fallback: Tesseract is missing)"))
                }
                (Ok(_), Err(why), Ok(o)) => Ok(format!("{o} only ({why})")),
                (Ok(_), Err(why), Err(no_ocr)) => Err(format!("{why}; {no_ocr}")),
            };
            vec![
                check("screenshot", display.clone()),
                check("screen_ocr", ocr_line),
                check("element_locate", locate),
            ]
        })
    }
}

/// Runs blocking desktop work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AaiError> + Send + 'static,
) -> Result<T, AaiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| crate::failed(format!("the desktop task failed: {e}")))?
}

fn invalid(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

/// What part of the desktop a call is about, physical pixels, and a name for it.
fn area(x: &X11, space: &Space, args: &Map<String, Value>) -> Result<(Rect, String), AaiError> {
    let mode = args
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("fullscreen");
    match mode {
        "fullscreen" => Ok((space.desktop, "all".into())),
        "display" => {
            let monitors = x.monitors();
            let index = args.get("display").and_then(Value::as_u64).unwrap_or(0) as usize;
            let monitor = monitors.get(index).ok_or_else(|| {
                invalid(format!(
                    "there is no display {index}; this desktop has {} ({})",
                    monitors.len(),
                    monitors
                        .iter()
                        .enumerate()
                        .map(|(i, m)| format!("{i}: {}", m.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            Ok((monitor.bounds, format!("{index}:{}", monitor.name)))
        }
        "window" => {
            let title = args
                .get("window_title")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("mode window needs `window_title`"))?;
            let window = crate::apps::find_window(x, title)?;
            let bounds = window.bounds.intersect(&space.desktop).ok_or_else(|| {
                invalid(format!("the window {:?} is off the screen", window.title))
            })?;
            Ok((bounds, format!("window:{}", window.title)))
        }
        "region" => {
            let region = rect_arg(args.get("region"), "region")?
                .ok_or_else(|| invalid("mode region needs `region`"))?;
            let bounds = space
                .rect_to_physical(region)
                .ok_or_else(|| invalid("the region is outside the screen"))?;
            Ok((bounds, "region".into()))
        }
        other => Err(invalid(format!("unknown mode {other:?}"))),
    }
}

/// Captures `area` with protected windows blacked out.
pub fn capture(x: &X11, config: &DesktopConfig, area: Rect) -> Result<RgbImage, AaiError> {
    let mut image = x.capture(area)?;
    for window in x.windows() {
        if window.minimized || config.protects(&window).is_none() {
            continue;
        }
        if let Some(hidden) = window.bounds.intersect(&area) {
            for py in 0..hidden.height {
                for px in 0..hidden.width {
                    let ix = (hidden.x - area.x) as u32 + px;
                    let iy = (hidden.y - area.y) as u32 + py;
                    if ix < image.width() && iy < image.height() {
                        image.put_pixel(ix, iy, image::Rgb([0, 0, 0]));
                    }
                }
            }
        }
    }
    Ok(image)
}

/// Waits until two looks at `area`, `SETTLE_EVERY` apart, see the same pixels, for at most
/// `limit`. Returns whether it settled and how long it waited.
fn settle(x: &X11, area: Rect, limit: Duration) -> Result<(bool, u64), AaiError> {
    let started = Instant::now();
    let mut last = fingerprint(&x.capture(area)?);
    loop {
        if started.elapsed() >= limit {
            return Ok((false, started.elapsed().as_millis() as u64));
        }
        std::thread::sleep(SETTLE_EVERY.min(limit.saturating_sub(started.elapsed())));
        let now = fingerprint(&x.capture(area)?);
        if now == last {
            return Ok((true, started.elapsed().as_millis() as u64));
        }
        last = now;
    }
}

fn fingerprint(image: &RgbImage) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(image.as_raw()).into()
}

/// Scales a physical capture into the agent's space.
pub fn to_agent_size(image: RgbImage, space: &Space) -> RgbImage {
    if space.scale >= 1.0 {
        return image;
    }
    let width = ((f64::from(image.width()) * space.scale).round() as u32).max(1);
    let height = ((f64::from(image.height()) * space.scale).round() as u32).max(1);
    image::imageops::resize(&image, width, height, image::imageops::FilterType::Triangle)
}

/// Encodes an image; returns its bytes and MIME type.
pub fn encode(
    image: &RgbImage,
    format: &str,
    quality: u8,
) -> Result<(Vec<u8>, &'static str), AaiError> {
    let mut out = Vec::new();
    let (w, h) = image.dimensions();
    let fail = |e: image::ImageError| crate::failed(format!("cannot encode the screenshot: {e}"));
    let mime = match format {
        "png" => {
            image::codecs::png::PngEncoder::new_with_quality(
                &mut out,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            )
            .write_image(image.as_raw(), w, h, image::ExtendedColorType::Rgb8)
            .map_err(fail)?;
            "image/png"
        }
        "webp" => {
            image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(image.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(fail)?;
            "image/webp"
        }
        _ => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100))
                .write_image(image.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(fail)?;
            "image/jpeg"
        }
    };
    Ok((out, mime))
}

/// The result shape of a binary output with its metadata beside it.
pub fn image_output(bytes: &[u8], mime: &str, mut meta: Map<String, Value>) -> Value {
    meta.insert(
        aai_executor::rest::BINARY_KEY.into(),
        json!({
            "mime": mime,
            "bytes": bytes.len(),
            "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
    );
    Value::Object(meta)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn screenshot(
    x: &X11,
    config: &DesktopConfig,
    args: &Map<String, Value>,
) -> Result<Value, AaiError> {
    let space = Space::new(x.desktop(), config.max_edge());
    let (area, display) = area(x, &space, args)?;
    let settle_ms = args.get("settle_ms").and_then(Value::as_u64).unwrap_or(0);
    let settled = if settle_ms > 0 {
        Some(settle(x, area, Duration::from_millis(settle_ms))?)
    } else {
        None
    };
    let image = to_agent_size(capture(x, config, area)?, &space);
    let format = args.get("format").and_then(Value::as_str).unwrap_or("jpeg");
    let quality = args.get("quality").and_then(Value::as_u64).unwrap_or(80) as u8;
    let (bytes, mime) = encode(&image, format, quality)?;
    let (ox, oy) = space.to_agent(area.x, area.y);
    let mut meta = Map::new();
    meta.insert("width".into(), json!(image.width()));
    meta.insert("height".into(), json!(image.height()));
    meta.insert("scale".into(), json!(space.scale));
    meta.insert("origin".into(), json!({"x": ox, "y": oy}));
    meta.insert("display".into(), json!(display));
    meta.insert("screen".into(), space.describe());
    meta.insert("timestamp".into(), json!(now_ms()));
    if let Some((settled, waited)) = settled {
        meta.insert("settled".into(), json!(settled));
        meta.insert("waited_ms".into(), json!(waited));
    }
    Ok(image_output(&bytes, mime, meta))
}

/// An image the agent sent (base64 PNG/JPEG/WebP), decoded.
fn decode_image(text: &str) -> Result<RgbImage, AaiError> {
    let text = text
        .split_once("base64,")
        .map_or(text, |(_, data)| data)
        .trim();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| invalid(format!("`image` is not base64: {e}")))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(invalid(format!(
            "`image` is {} bytes; at most {MAX_IMAGE_BYTES}",
            bytes.len()
        )));
    }
    image::load_from_memory(&bytes)
        .map(|i| i.to_rgb8())
        .map_err(|e| invalid(format!("`image` is not a PNG, JPEG or WebP image: {e}")))
}

/// Text found in an image whose pixel (0, 0) is at agent point `origin` and whose pixels are
/// `per_agent` physical pixels per agent unit (1 for images the agent sent).
struct Found {
    blocks: Vec<ocr::Block>,
}

impl Screen {
    /// OCR of the screen (physical resolution, for accuracy), a region, or an image sent;
    /// every box in the agent's space.
    async fn read_text(&self, args: &Map<String, Value>) -> Result<Found, AaiError> {
        let language = args
            .get("language")
            .and_then(Value::as_str)
            .filter(|l| *l != "auto")
            .unwrap_or(&self.config.ocr_language)
            .to_owned();
        let (png, map): (Vec<u8>, Box<dyn Fn(Rect) -> Rect + Send>) = if let Some(text) =
            args.get("image").and_then(Value::as_str)
        {
            let image = decode_image(text)?;
            let (png, _) = encode(&image, "png", 100)?;
            (png, Box::new(|r| r))
        } else {
            let (desktop, config, args) = (self.desktop.clone(), self.config.clone(), args.clone());
            blocking(move || {
                let x = desktop.x11()?;
                let space = Space::new(x.desktop(), config.max_edge());
                let area = match rect_arg(args.get("region"), "region")? {
                    Some(region) => space
                        .rect_to_physical(region)
                        .ok_or_else(|| invalid("the region is outside the screen"))?,
                    None => space.desktop,
                };
                let image = capture(&x, &config, area)?;
                let (png, _) = encode(&image, "png", 100)?;
                let map = move |r: Rect| {
                    space.rect_to_agent(Rect::new(r.x + area.x, r.y + area.y, r.width, r.height))
                };
                Ok((png, Box::new(map) as Box<dyn Fn(Rect) -> Rect + Send>))
            })
            .await?
        };
        let mut blocks = ocr::read(png, &language, Duration::from_secs(30)).await?;
        for block in &mut blocks {
            block.bounds = map(block.bounds);
        }
        Ok(Found { blocks })
    }

    async fn ocr(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        Ok(ocr::to_json(&self.read_text(args).await?.blocks))
    }

    async fn locate(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let description = args
            .get("description")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("`description` is required"))?
            .to_owned();
        let role = args.get("role").and_then(Value::as_str).map(str::to_owned);
        let max = args.get("max_results").and_then(Value::as_u64).unwrap_or(5) as usize;
        let mut hits: Vec<crate::a11y::Hit> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        if args.get("image").is_none() {
            match crate::a11y::locate(&self.desktop, &self.config, &description, role.as_deref())
                .await
            {
                Ok(found) => hits = found,
                Err(error) => notes.push(format!("accessibility tree: {}", error.message)),
            }
        }
        if hits.is_empty() {
            match self.read_text(args).await {
                Ok(found) => hits = crate::a11y::match_text(&found.blocks, &description),
                Err(error) => notes.push(format!("OCR: {}", error.message)),
            }
        }
        hits.truncate(max);
        let mut out = json!({
            "found": !hits.is_empty(),
            "elements": hits.iter().map(crate::a11y::Hit::to_json).collect::<Vec<_>>(),
        });
        if !notes.is_empty() {
            out["notes"] = json!(notes);
        }
        Ok(out)
    }
}
