//! The CPU part of a screenshot, without an X server: scaling a 1920×1080 capture into the
//! agent's space and encoding it. (`aai-bench desktop` measures the whole call on Xvfb.)

use aai_desktop::desktop::{Rect, Space};
use aai_desktop::screen::{encode, to_agent_size};
use criterion::{Criterion, criterion_group, criterion_main};

/// A screen-like image: flat areas, text-like stripes and a gradient.
fn screen() -> image::RgbImage {
    image::RgbImage::from_fn(1920, 1080, |x, y| {
        if y % 24 < 3 && x % 200 < 150 {
            image::Rgb([20, 20, 20])
        } else if x < 300 {
            image::Rgb([240, 240, 245])
        } else {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        }
    })
}

fn bench(c: &mut Criterion) {
    let capture = screen();
    let space = Space::new(Rect::new(0, 0, 1920, 1080), 1568);
    c.bench_function("scale 1920x1080 to 1568x882", |b| {
        b.iter(|| to_agent_size(capture.clone(), &space))
    });
    let scaled = to_agent_size(capture.clone(), &space);
    c.bench_function("encode 1568x882 jpeg q80", |b| {
        b.iter(|| encode(&scaled, "jpeg", 80).expect("jpeg"))
    });
    c.bench_function("encode 1568x882 png", |b| {
        b.iter(|| encode(&scaled, "png", 80).expect("png"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
