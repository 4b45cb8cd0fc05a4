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
use crate::desktop::{DesktopConfig, Rect, Space, blocking, rect_arg};
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
    pub fn new(setup: &Setup, display: &crate::Display) -> Self {
        Self {
            config: setup.desktop.clone(),
            desktop: display.clone(),
        }
    }
}

impl Toolset for Screen {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn drives_desktop(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            if let Some(os) = crate::desktop::remote::native() {
                return self.remote(os, call.tool, call.args).await;
            }
            if self.desktop.wayland_only() && !call.args.contains_key("image") {
                return self.through_portal(call.tool, call.args).await;
            }
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

    fn plan(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        target: Option<aai_descriptor::Platform>,
    ) -> Value {
        crate::desktop::remote::plan_for(&DESCRIPTOR.app_id, tool, args, &self.config, target)
    }

    fn doctor(&self) -> BoxFuture<'_, Vec<aai_toolset::Check>> {
        Box::pin(async move {
            let desktop = self.desktop.clone();
            let display = if self.desktop.wayland_only() {
                Ok("the XDG Screenshot portal (the desktop may ask the user)".to_owned())
            } else {
                blocking(move || Ok(desktop.describe()))
                    .await
                    .unwrap_or_else(Err)
            };
            let ocr = ocr::installed(&self.config.ocr_language).await;
            let a11y = crate::a11y::reachable(&self.desktop).await;
            let check = |tool: &str, result: Result<String, AaiError>| match result {
                Ok(backend) => aai_toolset::Check::ok(tool, backend),
                Err(problem) => aai_toolset::Check::failed(tool, problem.message),
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
                (Ok(_), Err(why), Ok(o)) => Ok(format!("{o} only ({})", why.message)),
                (Ok(_), Err(why), Err(no_ocr)) => Err(AaiError::new(
                    why.kind,
                    format!("{}; {}", why.message, no_ocr.message),
                )),
            };
            vec![
                check("screenshot", display.clone()),
                check("screen_ocr", ocr_line),
                check("element_locate", locate),
            ]
        })
    }
}

impl Screen {
    /// macOS and Windows: the OS's fixed program captures (or locates); scaling, encoding and
    /// OCR happen here as on Linux.
    async fn remote(
        &self,
        os: aai_descriptor::Platform,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, AaiError> {
        use crate::desktop::remote;
        let timeout = Duration::from_secs(30);
        match tool {
            "screenshot" => {
                let answer = remote::call(os, tool, args, &self.config, timeout).await?;
                from_program(&answer, &self.config, args)
            }
            // An image the agent sent is read with Tesseract; the screen with the OS's own
            // OCR (Vision, Windows.Media.Ocr) inside the program.
            "screen_ocr" if args.contains_key("image") => self.ocr(args).await,
            _ => remote::call(os, tool, args, &self.config, timeout).await,
        }
    }
}

impl Screen {
    /// A Wayland session without X: the picture comes from the Screenshot portal, and OCR and
    /// the OCR part of element_locate read it; boxes are scaled into the agent's space.
    async fn through_portal(
        &self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, AaiError> {
        use base64::Engine as _;
        let png = crate::desktop::portal::screenshot(self.desktop.session_bus()).await?;
        let size = image::load_from_memory(&png)
            .map(|i| (i.width(), i.height()))
            .map_err(|e| {
                aai_toolset::failed(format!("the portal's screenshot is unreadable: {e}"))
            })?;
        let answer = json!({
            "png": base64::engine::general_purpose::STANDARD.encode(&png),
            "desktop": {"x": 0, "y": 0, "width": size.0, "height": size.1},
        });
        match tool {
            "screenshot" => from_program(&answer, &self.config, args),
            "screen_ocr" | "element_locate" => {
                let space = Space::new(Rect::new(0, 0, size.0, size.1), self.config.max_edge());
                let mut with_image = args.clone();
                with_image.insert("image".into(), answer["png"].clone());
                let language = args
                    .get("language")
                    .and_then(Value::as_str)
                    .unwrap_or(&self.config.ocr_language)
                    .to_owned();
                let image = image::load_from_memory(&png)
                    .map_err(|e| {
                        aai_toolset::failed(format!("the portal's screenshot is unreadable: {e}"))
                    })?
                    .to_rgb8();
                let (png, factor) = ocr_png(image)?;
                let mut blocks = ocr::read(png, &language, Duration::from_secs(30)).await?;
                for block in &mut blocks {
                    block.bounds = space.rect_to_agent(shrink(block.bounds, factor));
                }
                if tool == "screen_ocr" {
                    return Ok(ocr::to_json(&blocks));
                }
                let description = args
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(role) = args.get("role").and_then(Value::as_str) {
                    return Ok(json!({
                        "found": false,
                        "elements": [],
                        "notes": [format!("Wayland: elements are found by OCR of the portal's screenshot only, which cannot tell roles; nothing is answered for the role {role:?} (call again without `role`)")],
                    }));
                }
                let hits = crate::a11y::match_text(&blocks, description);
                Ok(json!({
                    "found": !hits.is_empty(),
                    "elements": hits.iter().map(crate::a11y::Hit::to_json).collect::<Vec<_>>(),
                    "notes": ["Wayland: element bounds come from OCR of the portal's screenshot only"],
                }))
            }
            other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
        }
    }
}

/// A screenshot from the macOS/Windows program's answer (`{png, desktop, hidden?}`: the
/// capture in pixels, the desktop in points, protected windows in points): protected windows
/// blacked out, scaled into the agent's space, encoded as asked. Only full-screen and region
/// captures are offered there.
///
/// # Errors
/// An answer without an image, or a mode the program does not offer.
pub fn from_program(
    answer: &Value,
    config: &DesktopConfig,
    args: &Map<String, Value>,
) -> Result<Value, AaiError> {
    use base64::Engine as _;
    let mode = args
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("fullscreen");
    if !matches!(mode, "fullscreen" | "region") {
        return Err(crate::desktop::not_supported(&format!(
            "screenshot mode {mode} is offered on Linux (X11) only; use fullscreen or region here"
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer["png"].as_str().unwrap_or_default())
        .map_err(|_| aai_toolset::failed("the desktop program sent no image"))?;
    let mut image = image::load_from_memory(&bytes)
        .map_err(|e| {
            aai_toolset::failed(format!("the desktop program's image is unreadable: {e}"))
        })?
        .to_rgb8();
    let points = Rect::new(
        0,
        0,
        answer["desktop"]["width"]
            .as_u64()
            .unwrap_or(u64::from(image.width())) as u32,
        answer["desktop"]["height"]
            .as_u64()
            .unwrap_or(u64::from(image.height())) as u32,
    );
    // Pixels per point (2 on a Retina display).
    let ratio = f64::from(image.width()) / f64::from(points.width.max(1));
    for hidden in answer["hidden"].as_array().into_iter().flatten() {
        let n = |k: &str| hidden[k].as_f64().unwrap_or(0.0) * ratio;
        let (x0, y0) = (n("x").max(0.0) as u32, n("y").max(0.0) as u32);
        let (x1, y1) = ((n("x") + n("width")) as u32, (n("y") + n("height")) as u32);
        for y in y0..y1.min(image.height()) {
            for x in x0..x1.min(image.width()) {
                image.put_pixel(x, y, image::Rgb([0, 0, 0]));
            }
        }
    }
    let space = Space::new(points, config.max_edge());
    let area = match rect_arg(args.get("region"), "region")? {
        Some(region) if mode == "region" => space
            .rect_to_physical(region)
            .ok_or_else(|| invalid("the region is outside the screen"))?,
        _ => points,
    };
    let crop = image::imageops::crop_imm(
        &image,
        (f64::from(area.x) * ratio) as u32,
        (f64::from(area.y) * ratio) as u32,
        (f64::from(area.width) * ratio) as u32,
        (f64::from(area.height) * ratio) as u32,
    )
    .to_image();
    // Scale from pixels straight into the agent's space.
    let pixel_space = Space {
        desktop: Rect::new(0, 0, crop.width(), crop.height()),
        scale: space.scale / ratio,
    };
    let scaled = to_agent_size(crop, &pixel_space);
    let format = args.get("format").and_then(Value::as_str).unwrap_or("jpeg");
    let quality = args.get("quality").and_then(Value::as_u64).unwrap_or(80) as u8;
    let (bytes, mime) = encode(&scaled, format, quality)?;
    let (ox, oy) = space.to_agent(area.x, area.y);
    let mut meta = Map::new();
    meta.insert("width".into(), json!(scaled.width()));
    meta.insert("height".into(), json!(scaled.height()));
    meta.insert("scale".into(), json!(space.scale));
    meta.insert("pixel_ratio".into(), json!(ratio));
    meta.insert("origin".into(), json!({"x": ox, "y": oy}));
    meta.insert("display".into(), json!("all"));
    meta.insert("screen".into(), space.describe());
    meta.insert("timestamp".into(), json!(now_ms()));
    Ok(image_output(&bytes, mime, meta))
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
        if window.minimized || config.protects(&window.title, &window.class).is_none() {
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

/// Scales a physical capture into the agent's space (bilinear convolution, SIMD).
pub fn to_agent_size(image: RgbImage, space: &Space) -> RgbImage {
    if space.scale >= 1.0 {
        return image;
    }
    let (w, h) = image.dimensions();
    let width = ((f64::from(w) * space.scale).round() as u32).max(1);
    let height = ((f64::from(h) * space.scale).round() as u32).max(1);
    resize(
        image,
        width,
        height,
        fast_image_resize::FilterType::Bilinear,
    )
}

/// `image` resized to `width`×`height` with `filter` (SIMD); a blank image of that size if
/// the resizer refuses (it never does for these pixel types).
fn resize(
    image: RgbImage,
    width: u32,
    height: u32,
    filter: fast_image_resize::FilterType,
) -> RgbImage {
    use fast_image_resize::{PixelType, ResizeAlg, ResizeOptions, Resizer, images};
    let (w, h) = image.dimensions();
    let Ok(source) = images::Image::from_vec_u8(w, h, image.into_raw(), PixelType::U8x3) else {
        return RgbImage::new(width, height);
    };
    let mut target = images::Image::new(width, height, PixelType::U8x3);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(filter));
    if Resizer::new()
        .resize(&source, &mut target, &options)
        .is_err()
    {
        return RgbImage::new(width, height);
    }
    RgbImage::from_raw(width, height, target.into_vec())
        .unwrap_or_else(|| RgbImage::new(width, height))
}

/// Pixels Tesseract is given at most: enlarging past this costs more time than it gains.
const OCR_PIXELS: u64 = 8_400_000;
/// The most an image is enlarged for OCR.
const OCR_ENLARGE: u32 = 3;

/// How much to enlarge an image of `width`×`height` before OCR. Screen text is 9–16 px
/// high, well under the 20–30 px capitals Tesseract reads best; at the screen's own size it
/// drops small digits ("42" read as "4") and reads short lines as nothing. Three times as
/// large while the result stays within [`OCR_PIXELS`], less for larger images, never smaller.
pub fn ocr_factor(width: u32, height: u32) -> u32 {
    let pixels = u64::from(width.max(1)) * u64::from(height.max(1));
    (1..=OCR_ENLARGE)
        .rev()
        .find(|f| pixels * u64::from(f * f) <= OCR_PIXELS)
        .unwrap_or(1)
}

/// `image` enlarged `factor` times (Catmull-Rom, which keeps glyph edges sharp).
pub fn enlarge(image: RgbImage, factor: u32) -> RgbImage {
    if factor <= 1 {
        return image;
    }
    let (w, h) = image.dimensions();
    resize(
        image,
        w * factor,
        h * factor,
        fast_image_resize::FilterType::CatmullRom,
    )
}

/// The PNG Tesseract reads for `image`, and how many times larger than `image` it is.
///
/// # Errors
/// The image cannot be encoded.
pub fn ocr_png(image: RgbImage) -> Result<(Vec<u8>, u32), AaiError> {
    let factor = ocr_factor(image.width(), image.height());
    let (png, _) = encode(&enlarge(image, factor), "png", 100)?;
    Ok((png, factor))
}

/// A box Tesseract found in an image enlarged `factor` times, in the image's own pixels.
pub fn shrink(r: Rect, factor: u32) -> Rect {
    let f = factor.max(1);
    let (x0, y0) = (r.x.div_euclid(f as i32), r.y.div_euclid(f as i32));
    let x1 = (r.x + r.width as i32 + f as i32 - 1).div_euclid(f as i32);
    let y1 = (r.y + r.height as i32 + f as i32 - 1).div_euclid(f as i32);
    Rect::new(x0, y0, (x1 - x0).max(1) as u32, (y1 - y0).max(1) as u32)
}

/// Encodes an image; returns its bytes and MIME type.
pub fn encode(
    image: &RgbImage,
    format: &str,
    quality: u8,
) -> Result<(Vec<u8>, &'static str), AaiError> {
    let mut out = Vec::new();
    let (w, h) = image.dimensions();
    let fail =
        |e: image::ImageError| aai_toolset::failed(format!("cannot encode the screenshot: {e}"));
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
            let (Ok(w16), Ok(h16)) = (u16::try_from(w), u16::try_from(h)) else {
                return Err(aai_toolset::failed("the image is too large for JPEG"));
            };
            jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100))
                .encode(image.as_raw(), w16, h16, jpeg_encoder::ColorType::Rgb)
                .map_err(|e| aai_toolset::failed(format!("cannot encode the screenshot: {e}")))?;
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

/// Text found on the screen or in an image, every box in the agent's space.
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
            let (png, factor) = ocr_png(decode_image(text)?)?;
            (png, Box::new(move |r| shrink(r, factor)))
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
                // The screen's own pixels, not the agent's smaller picture of them, enlarged
                // for Tesseract; boxes come back through both scales.
                let (png, factor) = ocr_png(capture(&x, &config, area)?)?;
                let map = move |r: Rect| {
                    let r = shrink(r, factor);
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
        // OCR reads text, not roles: an element asked for by role is never answered with
        // whatever text matches (a table cell for a button), and no time goes to reading.
        if hits.is_empty() && role.is_none() {
            match self.read_text(args).await {
                Ok(found) => hits = crate::a11y::match_text(&found.blocks, &description),
                Err(error) => notes.push(format!("OCR: {}", error.message)),
            }
        } else if let (true, Some(role)) = (hits.is_empty(), &role) {
            notes.push(format!(
                "no element with the role {role:?} matches in the accessibility tree; OCR cannot tell roles, so the screen's text was not searched (call again without `role` to search it)"
            ));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the macOS program sends on a Retina display: the capture at 2 pixels per point,
    /// a protected window in points. The result is in the one agent space, the window black.
    #[test]
    fn program_captures_are_scaled_from_pixels_and_protected_windows_hidden() {
        use base64::Engine as _;
        let capture = RgbImage::from_pixel(4000, 2000, image::Rgb([250, 250, 250]));
        let (png, _) = encode(&capture, "png", 100).expect("png");
        let answer = json!({
            "png": base64::engine::general_purpose::STANDARD.encode(png),
            "desktop": {"x": 0, "y": 0, "width": 2000, "height": 1000},
            "hidden": [{"x": 0, "y": 0, "width": 500, "height": 1000}],
        });
        let config = DesktopConfig::default();
        let args = json!({"format": "png"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let out = from_program(&answer, &config, &args).expect("screenshot");
        assert_eq!(
            (out["width"].as_u64(), out["height"].as_u64()),
            (Some(1568), Some(784))
        );
        assert_eq!(out["pixel_ratio"], 2.0);
        let data = out[aai_executor::rest::BINARY_KEY]["base64"]
            .as_str()
            .unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("b64");
        let image = image::load_from_memory(&bytes).expect("png").to_rgb8();
        assert_eq!(
            image.get_pixel(100, 400).0,
            [0, 0, 0],
            "the protected window is black"
        );
        assert_eq!(image.get_pixel(1200, 400).0, [250, 250, 250]);
        // A region in agent units is cut from the right pixels.
        let region = json!({"mode": "region", "region": {"x": 784, "y": 0, "width": 392, "height": 392}, "format": "png"});
        let out =
            from_program(&answer, &config, region.as_object().expect("args")).expect("region");
        assert_eq!(out["origin"], json!({"x": 784, "y": 0}));
        assert!(
            out["width"].as_u64().is_some_and(|w| w.abs_diff(392) <= 1),
            "{}",
            out["width"]
        );
        let window = json!({"mode": "window", "window_title": "x"});
        let error = from_program(&answer, &config, window.as_object().expect("args"))
            .expect_err("not offered");
        assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
    }

    #[test]
    fn ocr_reads_an_enlarged_image_and_maps_boxes_back() {
        // A region or a small screen three times, a full HD screen twice, a 4K one as it is.
        assert_eq!(ocr_factor(700, 450), 3);
        assert_eq!(ocr_factor(1280, 800), 2);
        assert_eq!(ocr_factor(1920, 1080), 2);
        assert_eq!(ocr_factor(3840, 2160), 1);
        assert_eq!(ocr_factor(0, 0), 3);
        let image = RgbImage::from_pixel(10, 4, image::Rgb([255, 255, 255]));
        assert_eq!(enlarge(image, 3).dimensions(), (30, 12));
        // A box in the enlarged image covers the same pixels of the original, rounded outwards.
        assert_eq!(
            shrink(Rect::new(30, 60, 90, 30), 3),
            Rect::new(10, 20, 30, 10)
        );
        assert_eq!(shrink(Rect::new(31, 61, 1, 1), 3), Rect::new(10, 20, 1, 1));
        assert_eq!(shrink(Rect::new(7, 8, 9, 10), 1), Rect::new(7, 8, 9, 10));
    }
}
