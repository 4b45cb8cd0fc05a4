//! URL templates (`url_template` of iOS tools): the structure comes from the template, values
//! only fill path segments, query keys and values, and fragments, percent-encoded for the
//! component they land in.
//!
//! `mailapp://send?to=${to}` keeps its scheme, host, path and the `to=` key whatever `to` holds:
//! `&`, `=`, `#`, `/` or `%` in a value arrive encoded and can never add a parameter.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::template::as_text;

/// The part of a URL a placeholder sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Path,
    Query,
    Fragment,
}

/// Characters left as they are: RFC 3986 unreserved plus what each component allows and
/// gives no meaning to. Everything else in a value is percent-encoded.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
const PATH: &AsciiSet = &UNRESERVED
    .remove(b':')
    .remove(b'@')
    .remove(b'!')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b',');
// In a query `&`, `=`, `+` and `;` separate or mean something, so they stay encoded.
const QUERY: &AsciiSet = &PATH.remove(b'/').remove(b'?');
const FRAGMENT: &AsciiSet = &QUERY.remove(b'&').remove(b'=').remove(b'+').remove(b';');

impl Component {
    /// `value` percent-encoded for this component.
    pub fn encode(self, value: &str) -> String {
        let set = match self {
            Self::Path => PATH,
            Self::Query => QUERY,
            Self::Fragment => FRAGMENT,
        };
        utf8_percent_encode(value, set).to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Value { name: String, component: Component },
}

/// Why a `url_template` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("{template:?} has no scheme; start it with `{scheme}:`")]
    NoScheme { template: String, scheme: String },
    #[error("{template:?} must start with the section's scheme `{scheme}:`")]
    WrongScheme { template: String, scheme: String },
    #[error(
        "{0:?}: a placeholder in the host would let a value choose where the URL goes; put it in the path or the query"
    )]
    PlaceholderInHost(String),
}

/// A parsed `url_template`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTemplate {
    pieces: Vec<Piece>,
}

impl UrlTemplate {
    /// Parses `template`, whose scheme must be `scheme`.
    ///
    /// # Errors
    /// A message when the scheme differs or a placeholder sits in the scheme or the host.
    pub fn parse(template: &str, scheme: &str) -> Result<Self, TemplateError> {
        let Some((head, _)) = template.split_once(':') else {
            return Err(TemplateError::NoScheme {
                template: template.to_owned(),
                scheme: scheme.to_owned(),
            });
        };
        if !head.eq_ignore_ascii_case(scheme) {
            return Err(TemplateError::WrongScheme {
                template: template.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = &template[head.len() + 1..];
        literal.push_str(&template[..=head.len()]);
        let mut component = if let Some(after) = rest.strip_prefix("//") {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            if after[..end].contains("${") {
                return Err(TemplateError::PlaceholderInHost(template.to_owned()));
            }
            literal.push_str(&rest[..2 + end]);
            rest = &after[end..];
            Component::Path
        } else {
            Component::Path
        };
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("${")
                && let Some(end) = after.find('}')
            {
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Value {
                    name: after[..end].to_owned(),
                    component,
                });
                rest = &after[end + 1..];
                continue;
            }
            let c = rest.chars().next().unwrap_or_default();
            component = match (component, c) {
                (Component::Path, '?') => Component::Query,
                (Component::Path | Component::Query, '#') => Component::Fragment,
                (same, _) => same,
            };
            literal.push(c);
            rest = &rest[c.len_utf8()..];
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Self { pieces })
    }

    /// The URL for these arguments.
    ///
    /// # Errors
    /// [`FillError::Missing`] naming a placeholder `lookup` has no value for;
    /// [`FillError::DotSegment`] when a value makes a whole path segment `.` or `..`, which
    /// URL normalisation would turn into a move to another path (`/users/../notes` is sent
    /// as `/notes`).
    pub fn fill<'s>(
        &'s self,
        lookup: &dyn Fn(&str) -> Option<Value>,
    ) -> Result<String, FillError<'s>> {
        let mut url = String::new();
        let mut in_path = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => url.push_str(text),
                Piece::Value { name, component } => {
                    let value = lookup(name).ok_or(FillError::Missing(name.as_str()))?;
                    let start = url.len();
                    url.push_str(&component.encode(&as_text(&value)));
                    if *component == Component::Path {
                        in_path.push((start, url.len(), name.as_str()));
                    }
                }
            }
        }
        for (start, end, name) in in_path {
            let from = url[..start].rfind('/').map_or(0, |i| i + 1);
            let to = url[end..]
                .find(['/', '?', '#'])
                .map_or(url.len(), |i| end + i);
            if is_dot_segment(&url[from..to]) {
                return Err(FillError::DotSegment(name));
            }
        }
        Ok(url)
    }
}

/// Why a template could not be filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillError<'s> {
    /// No value for this placeholder.
    Missing(&'s str),
    /// This placeholder's value made a path segment `.` or `..`.
    DotSegment(&'s str),
}

/// `.` or `..`, in any spelling URL normalisation reads as one (`%2e`, `%2E`).
pub fn is_dot_segment(segment: &str) -> bool {
    let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
    decoded == "." || decoded == ".."
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_encoded_for_their_component() {
        let template = UrlTemplate::parse(
            "mailapp://send/${folder}?to=${to}&n=${n}#${frag}",
            "mailapp",
        )
        .expect("parse");
        let args = json!({"folder": "a/b?c", "to": "x&y=z+w #%", "n": 3, "frag": "p#q&r"});
        let url = template
            .fill(&|name| args.get(name).cloned())
            .expect("filled");
        assert_eq!(
            url,
            "mailapp://send/a%2Fb%3Fc?to=x%26y%3Dz%2Bw%20%23%25&n=3#p%23q&r"
        );
    }

    #[test]
    fn structure_never_comes_from_values() {
        assert!(
            UrlTemplate::parse("mailapp://${host}/x", "mailapp")
                .expect_err("host")
                .to_string()
                .contains("host")
        );
        assert!(
            UrlTemplate::parse("other://send", "mailapp")
                .expect_err("scheme")
                .to_string()
                .contains("mailapp:")
        );
        assert!(UrlTemplate::parse("${s}://send", "mailapp").is_err());
        // A value that is a whole `.` or `..` segment would move the URL elsewhere.
        let template =
            UrlTemplate::parse("https://api/v1/users/${id}/notes?q=${q}", "https").expect("parse");
        for id in ["..", ".", "%2e%2e"] {
            let args = json!({"id": id, "q": ".."});
            let filled = template.fill(&|name| args.get(name).cloned());
            if id.starts_with('%') {
                // `%` is encoded, so the server sees the literal text, never a dot segment.
                assert_eq!(
                    filled.expect("fill"),
                    "https://api/v1/users/%252e%252e/notes?q=.."
                );
            } else {
                assert_eq!(filled, Err(FillError::DotSegment("id")), "{id}");
            }
        }
        let args = json!({"id": "..x", "q": "."});
        assert!(template.fill(&|name| args.get(name).cloned()).is_ok());
        let pair = UrlTemplate::parse("https://api/${a}${b}/x", "https").expect("parse");
        let args = json!({"a": ".", "b": "."});
        assert!(pair.fill(&|name| args.get(name).cloned()).is_err());
        let partial = UrlTemplate::parse("https://api/%2e${a}/x", "https").expect("parse");
        let args = json!({"a": "."});
        assert!(partial.fill(&|name| args.get(name).cloned()).is_err());
        // A scheme without `//` has no host; its path may hold values.
        let template = UrlTemplate::parse("shortcuts:run?name=${n}", "shortcuts").expect("parse");
        let args = json!({"n": "a b"});
        assert_eq!(
            template
                .fill(&|name| args.get(name).cloned())
                .expect("fill"),
            "shortcuts:run?name=a%20b"
        );
    }
}
