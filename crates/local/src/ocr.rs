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
        "--psm",
        "3",
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
        .map_err(|e| crate::failed(format!("cannot make a folder for OCR: {e}")))?;
    let file = dir.path().join("screen.png");
    std::fs::write(&file, &png)
        .map_err(|e| crate::failed(format!("cannot write the image for OCR: {e}")))?;
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
            Err(crate::failed(format!(
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
pub async fn installed(language: &str) -> Result<String, String> {
    let command = Command::new("tesseract").arg("--list-langs");
    let output = run(&command, Duration::from_secs(10), "tesseract")
        .await
        .map_err(|_| {
            "Tesseract is not installed (Debian: apt-get install tesseract-ocr)".to_owned()
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
        Err(format!(
            "Tesseract lacks the language(s) {} (Debian: tesseract-ocr-{})",
            missing.join(", "),
            missing[0]
        ))
    }
}

/// Tesseract's TSV as lines: the words of each line joined, the line's box around them, and
/// the mean confidence of its words.
pub fn parse_tsv(tsv: &str) -> Vec<Block> {
    // (block, paragraph, line) → words with boxes and confidences.
    type Word = (String, Rect, f64);
    let mut lines: Vec<((u32, u32, u32), Vec<Word>)> = Vec::new();
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
        let key = (n(2) as u32, n(3) as u32, n(4) as u32);
        let rect = Rect::new(
            n(6) as i32,
            n(7) as i32,
            n(8).max(1) as u32,
            n(9).max(1) as u32,
        );
        match lines.last_mut() {
            Some((last, words)) if *last == key => words.push((text.to_owned(), rect, confidence)),
            _ => lines.push((key, vec![(text.to_owned(), rect, confidence)])),
        }
    }
    lines
        .into_iter()
        .map(|(_, words)| {
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
        .collect()
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
