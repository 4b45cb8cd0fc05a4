//! The set of apps the gateway offers: an immutable snapshot, swapped whole on re-discovery.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, LoadError, Parameters, Platform, naming};

use crate::catalog::cache::{Entry, Summary, listing_budget, listing_text};
use crate::catalog::discovery::{Found, Source};

/// One offered app.
#[derive(Debug)]
pub struct App {
    /// What is kept of its descriptor; the whole one comes from [`App::descriptor`].
    pub entry: Arc<Entry>,
    /// The section the gateway runs: the first of the configured platforms it has.
    pub platform: Platform,
    /// The file it came from, when its entry does not name it already (an entry held in
    /// memory): a second copy of every path is not kept.
    held_source: Option<PathBuf>,
    /// Its MCP tool name, `app_<slug>`.
    pub slug: String,
    /// Its one-line description in listings.
    pub listing: Arc<str>,
    /// Where it was found.
    pub source: Source,
    /// The source of the next copy of the same appId, which this one hides.
    pub hides: Option<Source>,
}

impl App {
    /// An app outside any snapshot (one found by `web_discover`).
    pub fn standalone(descriptor: Arc<Descriptor>, platform: Platform, source: PathBuf) -> Self {
        let slug = naming::assign_slugs(&[descriptor.app_id.as_str()]).remove(0);
        let entry = Entry::held(descriptor);
        Self {
            listing: listing(&entry, &slug),
            entry,
            platform,
            held_source: Some(source),
            slug,
            source: Source::Discovered,
            hides: None,
        }
    }

    /// The file it came from.
    pub fn source(&self) -> &Path {
        match &self.held_source {
            Some(path) => path,
            None => self
                .entry
                .file_stamp()
                .map_or(Path::new(""), |(path, _)| path),
        }
    }

    pub fn id(&self) -> &str {
        &self.entry.summary.app_id
    }

    pub fn name(&self) -> &str {
        &self.entry.summary.name
    }

    pub fn summary(&self) -> &Summary {
        &self.entry.summary
    }

    /// Came from the network rather than from a file the user put on this machine.
    pub fn fetched(&self) -> bool {
        self.entry.fetched
    }

    /// The whole descriptor, read on demand (see [`crate::catalog::cache`]).
    ///
    /// # Errors
    /// Its file changed or went away since it was listed.
    pub fn descriptor(&self) -> Result<Arc<Descriptor>, AaiError> {
        self.entry.descriptor()
    }

    /// The compiled validator of a tool's `parameters` (`None` when it declares none),
    /// built on first use and kept while it is among the recently used.
    ///
    /// # Errors
    /// The compiler's message when the schema passed meta-validation but does not compile
    /// (an invalid `pattern`, say).
    pub fn validator(
        &self,
        tool: &str,
        parameters: Option<&Parameters>,
    ) -> Result<Option<Arc<jsonschema::Validator>>, jsonschema::ValidationError<'static>> {
        let Some(parameters) = parameters else {
            return Ok(None);
        };
        crate::catalog::cache::validator(&self.entry, tool, parameters).map(Some)
    }
}

/// Why a file found during discovery is not offered.
#[derive(Debug, Clone)]
pub enum Rejected {
    Invalid(LoadError),
    /// Another file with the same appId came first.
    Shadowed {
        path: PathBuf,
        source: Source,
        app_id: String,
        by: PathBuf,
        by_source: Source,
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
            Self::Shadowed {
                path,
                source,
                app_id,
                by,
                by_source,
            } => write!(
                f,
                "{}: (document): appId {app_id} is also in {} ({}), which takes precedence over this {} copy",
                path.display(),
                by.display(),
                by_source.words(),
                source.words()
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
pub struct Snapshot {
    /// Offered apps, sorted by appId (found by binary search).
    pub apps: Vec<Arc<App>>,
    /// Indexes into `apps`, sorted by tool name (no second copy of every name).
    by_slug: Vec<u32>,
    pub rejected: Vec<Rejected>,
    /// False while discovery is still loading files.
    pub complete: bool,
    /// The workflow files when this snapshot was taken, each offered as a `workflow_<name>`
    /// tool: when one changes, clients are told the tool list changed.
    pub workflows: Vec<crate::workflow::Found>,
    /// The same answer as JSON (`{"tools":[…]}`), for the stdio transport to copy out.
    pub tool_list_body: std::sync::OnceLock<Arc<Vec<u8>>>,
    /// Raised once this snapshot's tool list has been made for a client.
    pub listed: Listed,
    /// The [`crate::config::live::LiveConfig::generation`] this snapshot was made under: a new
    /// config (another exposure mode, other toolsets) is a new tool list.
    pub config_generation: u64,
}

/// A flag raised once, that a thread may wait for (with a limit).
#[derive(Debug, Default)]
pub struct Listed {
    raised: Mutex<bool>,
    changed: Condvar,
}

impl Listed {
    pub fn raise(&self) {
        let mut raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        if !*raised {
            *raised = true;
            self.changed.notify_all();
        }
    }

    /// Waits until the flag is raised or `at_most` has passed; whether it was raised.
    pub fn wait(&self, at_most: Duration) -> bool {
        let raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        let (raised, _) = self
            .changed
            .wait_timeout_while(raised, at_most, |raised| !*raised)
            .unwrap_or_else(PoisonError::into_inner);
        *raised
    }
}

/// The file chosen for an appId, its entry, the platform it runs, and the source of the
/// first copy it hides.
type Chosen<'a> = (&'a Found, Arc<Entry>, Platform, Option<Source>);

impl Snapshot {
    /// Builds a snapshot from everything found so far. Each app runs the first of
    /// `platforms` (in order of preference) that it has a section for.
    pub fn build(found: &[Found], platforms: &[Platform], complete: bool) -> Self {
        let mut ordered: Vec<&Found> = found.iter().collect();
        ordered.sort_by_key(|f| (f.source.precedence(), f.rank));
        let mut chosen: HashMap<&str, Chosen<'_>> = HashMap::new();
        let mut rejected = Vec::new();
        for item in ordered {
            let entry = match &item.outcome {
                Ok(entry) => entry,
                Err(error) => {
                    rejected.push(Rejected::Invalid(error.clone()));
                    continue;
                }
            };
            // Built-in apps (`local`) and MCP servers are served everywhere.
            let summary = &entry.summary;
            let Some(platform) = platforms
                .iter()
                .copied()
                .chain([Platform::Local, Platform::Mcp])
                .find(|&p| summary.has(p))
            else {
                rejected.push(Rejected::OtherPlatform {
                    path: item.path.clone(),
                    app_id: summary.app_id.clone(),
                    served: platforms.to_vec(),
                });
                continue;
            };
            if let Some((first, _, _, hides)) = chosen.get_mut(summary.app_id.as_str()) {
                rejected.push(Rejected::Shadowed {
                    path: item.path.clone(),
                    source: item.source,
                    app_id: summary.app_id.clone(),
                    by: first.path.clone(),
                    by_source: first.source,
                });
                hides.get_or_insert(item.source);
                continue;
            }
            chosen.insert(&summary.app_id, (item, entry.clone(), platform, None));
        }
        let mut entries: Vec<Chosen<'_>> = chosen.into_values().collect();
        entries.sort_by(|a, b| a.1.summary.app_id.cmp(&b.1.summary.app_id));
        let ids: Vec<&str> = entries
            .iter()
            .map(|(_, e, _, _)| e.summary.app_id.as_str())
            .collect();
        let slugs = naming::assign_slugs(&ids);
        let apps: Vec<Arc<App>> = entries
            .iter()
            .zip(slugs)
            .map(|((found, entry, platform, hides), slug)| {
                Arc::new(App {
                    listing: listing(entry, &slug),
                    entry: entry.clone(),
                    platform: *platform,
                    held_source: (entry.file_stamp().map(|(path, _)| path)
                        != Some(found.path.as_path()))
                    .then(|| found.path.clone()),
                    slug,
                    source: found.source,
                    hides: *hides,
                })
            })
            .collect();
        let mut by_slug: Vec<u32> = (0..apps.len())
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        by_slug.sort_by(|&a, &b| apps[a as usize].slug.cmp(&apps[b as usize].slug));
        Self {
            apps,
            by_slug,
            rejected,
            complete,
            workflows: Vec::new(),
            tool_list_body: std::sync::OnceLock::new(),
            listed: Listed::default(),
            config_generation: 0,
        }
    }

    /// An app by appId, by its tool name `app_<slug>`, or by the spec's `app:<appId>`.
    pub fn find(&self, name: &str) -> Option<&Arc<App>> {
        let name = name.strip_prefix("app:").unwrap_or(name);
        let by_id = || {
            self.apps
                .binary_search_by(|app| app.id().cmp(name))
                .ok()
                .map(|at| &self.apps[at])
        };
        let by_slug = || {
            self.by_slug
                .binary_search_by(|&at| self.apps[at as usize].slug.as_str().cmp(name))
                .ok()
                .map(|at| &self.apps[self.by_slug[at] as usize])
        };
        by_id().or_else(by_slug).or_else(|| {
            // By name or alias, as `aai_apps` finds apps (without case).
            let wanted = name.strip_prefix("app_").unwrap_or(name).replace('_', " ");
            self.apps.iter().find(|app| {
                let d = app.summary();
                std::iter::once(&d.name)
                    .chain(&d.aliases)
                    .any(|n| n.eq_ignore_ascii_case(name) || n.eq_ignore_ascii_case(&wanted))
            })
        })
    }

    /// Whether two snapshots offer the same apps from the same descriptors.
    pub fn same_apps(&self, other: &Self) -> bool {
        self.config_generation == other.config_generation
            && self.workflows == other.workflows
            && self.apps.len() == other.apps.len()
            && self.apps.iter().zip(&other.apps).all(|(a, b)| {
                a.slug == b.slug && a.source() == b.source() && Arc::ptr_eq(&a.entry, &b.entry)
            })
    }

    /// Apps whose id, name, aliases or description contain every word of `query`.
    pub fn search(&self, query: &str) -> Vec<&Arc<App>> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.apps
            .iter()
            .filter(|app| {
                let d = app.summary();
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
                let label = a.name().to_lowercase();
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

/// An app's one-line listing: its name, short description and aliases within the budget,
/// made once per entry (a rescan that finds the file unchanged reuses it).
fn listing(entry: &Entry, slug: &str) -> Arc<str> {
    let budget = listing_budget(slug);
    match entry
        .listing
        .get_or_init(|| (budget, listing_text(&entry.summary, budget)))
    {
        (made_for, text) if *made_for == budget => text.clone(),
        _ => listing_text(&entry.summary, budget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(rank: usize, id: &str) -> Found {
        let doc = serde_json::json!({"schema_version": "1.0", "appId": id, "name": format!("Name {rank}"),
            "description": "An app.", "platforms": {"linux": {"automation": "dbus",
            "service": "org.example.App", "object": "/org/example/App",
            "interface": "org.example.App", "tools": []}}});
        let descriptor = aai_descriptor::parse(id, doc.to_string().as_bytes()).expect("valid");
        Found {
            rank,
            source: Source::UserWritten,
            path: PathBuf::from(format!("/apps/{id}/aai.json")),
            outcome: Ok(Entry::held(Arc::new(descriptor))),
        }
    }

    #[test]
    fn a_raised_flag_ends_the_wait_and_an_unraised_one_times_out() {
        let listed = Arc::new(Listed::default());
        assert!(!listed.wait(Duration::from_millis(20)));
        let raiser = {
            let listed = listed.clone();
            std::thread::spawn(move || listed.raise())
        };
        assert!(listed.wait(Duration::from_secs(30)));
        raiser.join().expect("raised");
        // Once raised it stays raised.
        assert!(listed.wait(Duration::ZERO));
    }

    #[test]
    fn every_app_is_found_by_id_tool_name_and_name() {
        // Ids whose tool names sort differently from the ids, and two that share a last label.
        let ids: Vec<String> = (0..60)
            .map(|i| match i % 3 {
                0 => format!("com.vendor{}.mail", 59 - i),
                1 => format!("org.z{i}.tool-{}", 60 - i),
                _ => format!("net.a.app{i}"),
            })
            .collect();
        let found: Vec<Found> = ids.iter().enumerate().map(|(i, id)| found(i, id)).collect();
        let registry = Snapshot::build(&found, &[Platform::Linux], true);
        assert_eq!(registry.apps.len(), ids.len());
        for app in &registry.apps {
            for name in [
                app.id().to_owned(),
                format!("app:{}", app.id()),
                app.slug.clone(),
                app.name().to_owned(),
            ] {
                let hit = registry.find(&name).unwrap_or_else(|| panic!("{name}"));
                assert!(Arc::ptr_eq(hit, app), "{name} found {}", hit.id());
            }
        }
        for missing in ["", "com.vendor0", "app_", "app:nothing", "zzz"] {
            assert!(registry.find(missing).is_none(), "{missing}");
        }
        assert!(Snapshot::default().find("com.vendor59.mail").is_none());
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;

    fn offered(rank: usize, source: Source, id: &str) -> Found {
        let doc = serde_json::json!({"schema_version": "1.0", "appId": id, "name": format!("{source:?}"),
            "description": "An app.", "platforms": {"linux": {"automation": "dbus",
            "service": "org.example.App", "object": "/org/example/App",
            "interface": "org.example.App", "tools": []}}});
        let descriptor = aai_descriptor::parse(id, doc.to_string().as_bytes()).expect("valid");
        Found {
            rank,
            source,
            path: PathBuf::from(format!("/{source:?}/{rank}/aai.json")),
            outcome: Ok(Entry::held(Arc::new(descriptor))),
        }
    }

    /// Whatever the order files are found in, precedence goes by source, then by rank; the
    /// winner says what it hides and the loser says what hides it.
    #[test]
    fn sources_rank_by_precedence_then_position() {
        let order = [
            Source::PreferredStore,
            Source::BuiltIn,
            Source::UserWritten,
            Source::ConfiguredFolder,
            Source::WebRegistry,
            Source::Bundle,
            Source::Store,
        ];
        for (at, winner) in order.iter().enumerate() {
            for loser in &order[at + 1..] {
                // The loser is found first, and at a lower rank.
                let found = vec![
                    offered(0, *loser, "org.x.a"),
                    offered(9, *winner, "org.x.a"),
                ];
                let registry = Snapshot::build(&found, &[Platform::Linux], true);
                let app = registry.find("org.x.a").expect("offered");
                assert_eq!(
                    (app.source, app.hides),
                    (*winner, Some(*loser)),
                    "{winner:?} over {loser:?}"
                );
                let [
                    Rejected::Shadowed {
                        source, by_source, ..
                    },
                ] = registry.rejected.as_slice()
                else {
                    panic!("{:?}", registry.rejected);
                };
                assert_eq!((*source, *by_source), (*loser, *winner));
            }
        }
        // Within one source, the earlier file wins; an app offered once hides nothing.
        let found = vec![
            offered(3, Source::Store, "org.x.a"),
            offered(1, Source::Store, "org.x.a"),
            offered(2, Source::Store, "org.x.b"),
        ];
        let registry = Snapshot::build(&found, &[Platform::Linux], true);
        let a = registry.find("org.x.a").expect("a");
        assert_eq!(a.source(), Path::new("/Store/1/aai.json"));
        assert_eq!(registry.find("org.x.b").expect("b").hides, None);
        assert!(
            registry.rejected[0]
                .to_string()
                .contains("(app store), which takes precedence over this app store copy"),
            "{}",
            registry.rejected[0]
        );
    }
}
