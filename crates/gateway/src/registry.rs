//! The set of apps the gateway offers: an immutable snapshot, swapped whole on re-discovery.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aai_descriptor::{Descriptor, LoadError, Parameters, Platform, guide, naming};

use crate::discovery::Found;

/// One offered app.
#[derive(Debug)]
pub struct App {
    pub descriptor: Arc<Descriptor>,
    /// The section the gateway runs: the first of the configured platforms it has.
    pub platform: Platform,
    pub source: PathBuf,
    /// Its MCP tool name, `app_<slug>`.
    pub slug: String,
    /// Its one-line description in listings.
    pub listing: String,
    /// Compiled argument validators, by tool name, built on first use.
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

impl App {
    /// An app outside any snapshot (one found by `web_discover`).
    pub fn standalone(descriptor: Arc<Descriptor>, platform: Platform, source: PathBuf) -> Self {
        let slug = naming::assign_slugs(&[descriptor.app_id.as_str()]).remove(0);
        Self {
            listing: guide::listing_description(&descriptor, listing_budget(&slug)),
            descriptor,
            platform,
            source,
            slug,
            validators: Mutex::default(),
        }
    }

    pub fn id(&self) -> &str {
        &self.descriptor.app_id
    }

    /// The compiled validator of a tool's `parameters` (`None` when it declares none),
    /// built on first use and kept.
    ///
    /// # Errors
    /// The compiler's message when the schema passed meta-validation but does not compile
    /// (an invalid `pattern`, say).
    pub fn validator(
        &self,
        tool: &str,
        parameters: Option<&Parameters>,
    ) -> Result<Option<Arc<jsonschema::Validator>>, String> {
        let Some(parameters) = parameters else {
            return Ok(None);
        };
        if let Some(found) = self
            .validators
            .lock()
            .ok()
            .and_then(|v| v.get(tool).cloned())
        {
            return Ok(Some(found));
        }
        let validator =
            Arc::new(jsonschema::validator_for(&parameters.schema()).map_err(|e| e.to_string())?);
        if let Ok(mut validators) = self.validators.lock() {
            validators.insert(tool.to_owned(), validator.clone());
        }
        Ok(Some(validator))
    }
}

/// Why a file found during discovery is not offered.
#[derive(Debug, Clone)]
pub enum Rejected {
    Invalid(LoadError),
    /// Another file with the same appId came first.
    Shadowed {
        path: PathBuf,
        app_id: String,
        by: PathBuf,
    },
    /// Valid, but with no section for the platforms served here.
    OtherPlatform {
        path: PathBuf,
        app_id: String,
        served: Vec<Platform>,
    },
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(error) => write!(f, "{error}"),
            Self::Shadowed { path, app_id, by } => write!(
                f,
                "{}: (document): appId {app_id} is also in {}, which takes precedence",
                path.display(),
                by.display()
            ),
            Self::OtherPlatform {
                path,
                app_id,
                served,
            } => {
                let keys: Vec<&str> = served.iter().map(|p| p.key()).collect();
                write!(
                    f,
                    "{}: /platforms: {app_id} has no `{}` section, so it is not offered here (`platforms` in config.json chooses the sections served)",
                    path.display(),
                    keys.join("` or `")
                )
            }
        }
    }
}

/// A snapshot of the discovered apps.
#[derive(Debug, Default)]
pub struct Registry {
    /// Offered apps, sorted by appId.
    pub apps: Vec<Arc<App>>,
    by_id: HashMap<String, usize>,
    by_slug: HashMap<String, usize>,
    pub rejected: Vec<Rejected>,
    /// False while discovery is still loading files.
    pub complete: bool,
    /// The workflow files when this snapshot was taken, each offered as a `workflow_<name>`
    /// tool: when one changes, clients are told the tool list changed.
    pub workflows: Vec<crate::workflow::Found>,
}

impl Registry {
    /// Builds a snapshot from everything found so far. Each app runs the first of
    /// `platforms` (in order of preference) that it has a section for.
    pub fn build(found: &[Found], platforms: &[Platform], complete: bool) -> Self {
        let mut ordered: Vec<&Found> = found.iter().collect();
        ordered.sort_by_key(|f| f.rank);
        let mut chosen: HashMap<&str, (&Found, Arc<Descriptor>, Platform)> = HashMap::new();
        let mut rejected = Vec::new();
        for item in ordered {
            let descriptor = match &item.outcome {
                Ok(descriptor) => descriptor,
                Err(error) => {
                    rejected.push(Rejected::Invalid(error.clone()));
                    continue;
                }
            };
            // Built-in apps (`local`) are served everywhere.
            let Some(platform) = platforms
                .iter()
                .copied()
                .chain([Platform::Local])
                .find(|&p| descriptor.tools(p).is_some())
            else {
                rejected.push(Rejected::OtherPlatform {
                    path: item.path.clone(),
                    app_id: descriptor.app_id.clone(),
                    served: platforms.to_vec(),
                });
                continue;
            };
            if let Some((first, _, _)) = chosen.get(descriptor.app_id.as_str()) {
                rejected.push(Rejected::Shadowed {
                    path: item.path.clone(),
                    app_id: descriptor.app_id.clone(),
                    by: first.path.clone(),
                });
                continue;
            }
            chosen.insert(&descriptor.app_id, (item, descriptor.clone(), platform));
        }
        let mut entries: Vec<(&Found, Arc<Descriptor>, Platform)> = chosen.into_values().collect();
        entries.sort_by(|a, b| a.1.app_id.cmp(&b.1.app_id));
        let ids: Vec<&str> = entries.iter().map(|(_, d, _)| d.app_id.as_str()).collect();
        let slugs = naming::assign_slugs(&ids);
        let apps: Vec<Arc<App>> = entries
            .iter()
            .zip(slugs)
            .map(|((found, descriptor, platform), slug)| {
                Arc::new(App {
                    listing: guide::listing_description(descriptor, listing_budget(&slug)),
                    descriptor: descriptor.clone(),
                    platform: *platform,
                    source: found.path.clone(),
                    slug,
                    validators: Mutex::default(),
                })
            })
            .collect();
        let by_id = apps
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id().to_owned(), i))
            .collect();
        let by_slug = apps
            .iter()
            .enumerate()
            .map(|(i, a)| (a.slug.clone(), i))
            .collect();
        Self {
            apps,
            by_id,
            by_slug,
            rejected,
            complete,
            workflows: Vec::new(),
        }
    }

    /// An app by appId, by its tool name `app_<slug>`, or by the spec's `app:<appId>`.
    pub fn find(&self, name: &str) -> Option<&Arc<App>> {
        let name = name.strip_prefix("app:").unwrap_or(name);
        self.by_id
            .get(name)
            .or_else(|| self.by_slug.get(name))
            .map(|&index| &self.apps[index])
            .or_else(|| {
                // By name or alias, as `aai_apps` finds apps (without case).
                let wanted = name.strip_prefix("app_").unwrap_or(name).replace('_', " ");
                self.apps.iter().find(|app| {
                    let d = &app.descriptor;
                    std::iter::once(&d.name)
                        .chain(&d.aliases)
                        .any(|n| n.eq_ignore_ascii_case(name) || n.eq_ignore_ascii_case(&wanted))
                })
            })
    }

    /// Whether two snapshots offer the same apps from the same descriptors.
    pub fn same_apps(&self, other: &Self) -> bool {
        self.workflows == other.workflows
            && self.apps.len() == other.apps.len()
            && self.apps.iter().zip(&other.apps).all(|(a, b)| {
                a.slug == b.slug
                    && a.source == b.source
                    && Arc::ptr_eq(&a.descriptor, &b.descriptor)
            })
    }

    /// Apps whose id, name, aliases or description contain every word of `query`.
    pub fn search(&self, query: &str) -> Vec<&Arc<App>> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.apps
            .iter()
            .filter(|app| {
                let d = &app.descriptor;
                let haystack = format!(
                    "{} {} {} {}",
                    d.app_id,
                    d.name,
                    d.aliases.join(" "),
                    d.description
                )
                .to_lowercase();
                words.iter().all(|w| haystack.contains(w.as_str()))
            })
            .collect()
    }

    /// Offered app ids close to `name`, nearest first, for "did you mean" hints: ids and
    /// names that contain it (or that it contains), then the rest by similarity.
    pub fn suggestions(&self, name: &str, limit: usize) -> Vec<&str> {
        let needle = name
            .trim_start_matches("app:")
            .trim_start_matches("app_")
            .to_lowercase();
        let needle = needle.replace(['_', '.'], "");
        let mut scored: Vec<(bool, f64, &str)> = self
            .apps
            .iter()
            .map(|a| {
                let id = a.id().to_lowercase().replace(['_', '.'], "");
                let label = a.descriptor.name.to_lowercase();
                let contains = !needle.is_empty()
                    && (id.contains(&needle) || needle.contains(&label) || label.contains(&needle));
                let similar = strsim::normalized_levenshtein(&needle, &id).max(
                    strsim::normalized_levenshtein(&needle, &label.replace(' ', "")),
                );
                (contains, similar, a.id())
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
        scored
            .into_iter()
            .take(limit)
            .map(|(_, _, id)| id)
            .collect()
    }
}

/// The names among `names` nearest to `name`, nearest first (for "did you mean").
pub fn nearest<'a>(
    name: &str,
    names: impl IntoIterator<Item = &'a str>,
    limit: usize,
) -> Vec<&'a str> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .into_iter()
        .map(|n| (strsim::normalized_levenshtein(&lower, &n.to_lowercase()), n))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(limit).map(|(_, n)| n).collect()
}

/// Estimated tokens left for an app's description so its whole `tools/list` entry,
/// `{"name":"<slug>","description":"…","inputSchema":{"type":"object"}}`, stays under 40.
fn listing_budget(slug: &str) -> usize {
    const ENTRY_OVERHEAD: usize = 13;
    (40usize)
        .saturating_sub(ENTRY_OVERHEAD + guide::estimate_tokens(slug))
        .max(8)
}
