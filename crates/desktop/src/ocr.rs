//! Text on screen through Tesseract (Debian's `tesseract-ocr`; models ship with the package,
//! nothing is downloaded). The image goes in as a PNG file of our own in a private temporary
//! folder and the words come back as TSV on stdout; the only values in the argv are that path,
//! fixed options and a checked language name.

use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use aai_executor::process::{Command, run};
use serde_json::{Value, json};

use crate::desktop::Rect;

/// One line of text and where it is (pixels of the image given).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub text: String,
    pub bounds: Rect,
    /// 0–1.
    pub confidence: f64,
}

/// Whether `language` is a Tesseract language list (`eng`, `eng+deu`, `chi_sim`): letters,
/// digits, `_` and `+` only, so it can never be read as an option.
pub fn valid_language(language: &str) -> bool {
    !language.is_empty()
        && language.len() <= 64
        && !language.starts_with('+')
        && language
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
}

/// The argv for reading the PNG file `image` in `language`.
pub fn argv(image: &str, language: &str) -> Vec<String> {
    [
        image,
        "stdout",
        "-l",
        language,
        // Sparse text: a screen is labels, buttons and short lines scattered over a window,
        // not a page of paragraphs; page segmentation (3) drops lone short words ("42",
        // "OK") that sparse mode (11) reads.
        "--psm",
        "11",
        "-c",
        "tessedit_create_tsv=1",
        "quiet",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Reads the text of a PNG image.
///
/// # Errors
/// INVALID_PARAMS for a bad language, AUTOMATION_NOT_SUPPORTED when Tesseract is missing,
/// AUTOMATION_FAILED when it fails.
pub async fn read(png: Vec<u8>, language: &str, timeout: Duration) -> Result<Vec<Block>, AaiError> {
    if !valid_language(language) {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("{language:?} is not a Tesseract language list (e.g. eng or eng+deu)"),
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("aai-ocr-")
        .tempdir()
        .map_err(|e| aai_toolset::failed(format!("cannot make a folder for OCR: {e}")))?;
    let file = dir.path().join("screen.png");
    std::fs::write(&file, &png)
        .map_err(|e| aai_toolset::failed(format!("cannot write the image for OCR: {e}")))?;
    let command = Command::new("tesseract").args(argv(&file.to_string_lossy(), language));
    match run(&command, timeout, "tesseract").await {
        Ok(output) if output.success() => Ok(parse_tsv(&output.stdout)),
        Ok(output) => {
            let stderr = output.stderr;
            let status = output
                .code
                .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
            let hint = if stderr.contains("Failed loading language") {
                format!(
                    " Install its data (Debian: tesseract-ocr-{}).",
                    language.split('+').next().unwrap_or(language)
                )
            } else {
                String::new()
            };
            Err(aai_toolset::failed(format!(
                "tesseract exited with {status}: {}{hint}",
                stderr.trim()
            )))
        }
        Err(mut error) => {
            if error.kind == ErrorKind::AutomationNotSupported {
                error.message = format!(
                    "{} OCR on Linux needs Tesseract (Debian: apt-get install tesseract-ocr).",
                    error.message
                );
            }
            Err(error)
        }
    }
}

/// Whether Tesseract is installed with `language`: its version and languages, or what to
/// install.
///
/// # Errors
/// What is missing.
pub async fn installed(language: &str) -> Result<String, AaiError> {
    let missing = |message: String| AaiError::new(ErrorKind::AutomationNotSupported, message);
    let command = Command::new("tesseract").arg("--list-langs");
    let output = run(&command, Duration::from_secs(10), "tesseract")
        .await
        .map_err(|_| {
            missing("Tesseract is not installed (Debian: apt-get install tesseract-ocr)".to_owned())
        })?;
    let langs: Vec<&str> = output
        .stdout
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let missing: Vec<&str> = language.split('+').filter(|l| !langs.contains(l)).collect();
    if missing.is_empty() {
        Ok(format!("Tesseract ({})", langs.join(", ")))
    } else {
        Err(AaiError::new(
            ErrorKind::AutomationNotSupported,
            format!(
                "Tesseract lacks the language(s) {} (Debian: tesseract-ocr-{})",
                missing.join(", "),
                missing[0]
            ),
        ))
    }
}

/// Tesseract's TSV as lines: words side by side on one row joined (sparse mode reports many
/// of them as blocks of their own), the line's box around them, and the mean confidence of its
/// words. Lines come top to bottom, then left to right.
pub fn parse_tsv(tsv: &str) -> Vec<Block> {
    type Word = (String, Rect, f64);
    let mut lines: Vec<Vec<Word>> = Vec::new();
    for row in tsv.lines().skip(1) {
        let cols: Vec<&str> = row.split('\t').collect();
        if cols.len() < 12 || cols[0] != "5" {
            continue;
        }
        let text = cols[11].trim();
        let confidence: f64 = cols[10].parse().unwrap_or(-1.0);
        if text.is_empty() || confidence < 0.0 {
            continue;
        }
        let n = |i: usize| cols[i].parse::<i64>().unwrap_or(0);
        let rect = Rect::new(
            n(6) as i32,
            n(7) as i32,
            n(8).max(1) as u32,
            n(9).max(1) as u32,
        );
        // Sparse mode now and then reports one word twice, at one place.
        let twice = lines.iter().flatten().any(|(seen, at, _)| {
            seen == text
                && at
                    .intersect(&rect)
                    .is_some_and(|i| 2 * i.width * i.height >= rect.width * rect.height)
        });
        if twice {
            continue;
        }
        match lines
            .iter_mut()
            .find(|line| line.last().is_some_and(|last| beside(&last.1, &rect)))
        {
            Some(line) => line.push((text.to_owned(), rect, confidence)),
            None => lines.push(vec![(text.to_owned(), rect, confidence)]),
        }
    }
    let mut blocks: Vec<Block> = lines
        .into_iter()
        .map(|words| {
            let x0 = words.iter().map(|w| w.1.x).min().unwrap_or(0);
            let y0 = words.iter().map(|w| w.1.y).min().unwrap_or(0);
            let x1 = words
                .iter()
                .map(|w| w.1.x + w.1.width as i32)
                .max()
                .unwrap_or(0);
            let y1 = words
                .iter()
                .map(|w| w.1.y + w.1.height as i32)
                .max()
                .unwrap_or(0);
            let confidence = words.iter().map(|w| w.2).sum::<f64>() / words.len() as f64 / 100.0;
            Block {
                text: words
                    .iter()
                    .map(|w| w.0.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                bounds: Rect::new(x0, y0, (x1 - x0).max(1) as u32, (y1 - y0).max(1) as u32),
                confidence: (confidence * 1000.0).round() / 1000.0,
            }
        })
        .collect();
    blocks.sort_by_key(|b| (b.bounds.y, b.bounds.x));
    blocks
}

/// Whether `next` continues the line that ends with `last`: the two share most of a row, and
/// the gap between them is no wider than about a word space at that height.
fn beside(last: &Rect, next: &Rect) -> bool {
    let top = last.y.max(next.y);
    let bottom = (last.y + last.height as i32).min(next.y + next.height as i32);
    let height = last.height.min(next.height) as i32;
    let gap = next.x - (last.x + last.width as i32);
    bottom - top >= height / 2 && gap >= -height / 2 && gap <= height * 3 / 2
}

/// Blocks as the agent receives them: full text (lines joined) and each block.
pub fn to_json(blocks: &[Block]) -> Value {
    let text = blocks
        .iter()
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    json!({
        "text": text,
        "blocks": blocks.iter().map(|b| json!({
            "text": b.text, "bounds": b.bounds.to_json(), "confidence": b.confidence
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_lines_with_boxes_and_confidence() {
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
            1\t1\t0\t0\t0\t0\t0\t0\t800\t600\t-1\t\n\
            5\t1\t1\t1\t1\t1\t10\t20\t50\t12\t96.5\tHello\n\
            5\t1\t1\t1\t1\t2\t70\t21\t60\t12\t93.5\tworld\n\
            5\t1\t2\t1\t1\t1\t10\t100\t30\t10\t80\tOK\n\
            5\t1\t2\t1\t1\t2\t50\t100\t30\t10\t-1\t \n";
        let blocks = parse_tsv(tsv);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].text, "Hello world");
        assert_eq!(blocks[0].bounds, Rect::new(10, 20, 120, 13));
        assert!((blocks[0].confidence - 0.95).abs() < 1e-9);
        assert_eq!(blocks[1].text, "OK");
        assert_eq!(to_json(&blocks)["text"], "Hello world\nOK");

        // Sparse mode puts words of one line in blocks of their own, in no order: a row's
        // neighbours are joined, words far apart on it are not, and lines read top down.
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
            5\t1\t1\t1\t1\t1\t39\t111\t84\t27\t96\tTotal\n\
            5\t1\t2\t1\t1\t1\t39\t72\t33\t27\t97\t42\n\
            5\t1\t3\t1\t1\t1\t147\t111\t69\t27\t95\t1337\n\
            5\t1\t4\t1\t1\t1\t600\t112\t60\t27\t90\tHelp\n\
            5\t1\t5\t1\t1\t1\t601\t112\t60\t27\t90\tHelp\n";
        let texts: Vec<String> = parse_tsv(tsv).into_iter().map(|b| b.text).collect();
        assert_eq!(texts, ["42", "Total 1337", "Help"]);
    }

    #[test]
    fn languages_cannot_become_options() {
        for good in ["eng", "eng+deu", "chi_sim"] {
            assert!(valid_language(good), "{good}");
        }
        for bad in ["", "-l", "--psm", "eng deu", "../x", "+eng", "eng;rm"] {
            assert!(!valid_language(bad), "{bad}");
        }
        let argv = argv("/tmp/x/screen.png", "eng+deu");
        assert_eq!(argv[..4], ["/tmp/x/screen.png", "stdout", "-l", "eng+deu"]);
    }
}
