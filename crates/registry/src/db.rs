//! The registry's PostgreSQL: a pool, versioned migrations (`migrations/`), and every query.
//! Nothing is cached in the process: two servers on one database answer the same.

use serde_json::{Value, json};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Executor as _, Row as _};

/// Opens a pool of `max` connections to `url` and brings the schema up to date.
///
/// # Errors
/// The database cannot be reached or migrated.
pub async fn connect(url: &str, max: u32) -> anyhow::Result<PgPool> {
    let pool = PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .after_connect(|conn, _| {
            Box::pin(async move {
                // Typo tolerance: a query word that shares 40% of its trigrams with a word of
                // the app matches.
                conn.execute("SET pg_trgm.word_similarity_threshold = 0.4")
                    .await?;
                Ok(())
            })
        })
        .connect(url)
        .await?;
    sqlx::migrate!("./migrations").run(&pool).await?;
    let cost: Option<f32> = sqlx::query_scalar(
        "SELECT procost FROM pg_proc WHERE proname = 'word_similarity_op' LIMIT 1",
    )
    .fetch_optional(&pool)
    .await?;
    if cost.is_some_and(|cost| cost < 100.0) {
        tracing::warn!(
            "pg_trgm's word_similarity_op still has COST {cost:?}: run migrations/0002_search_costs.sql as the extension's owner, or typo searches may scan every app"
        );
    }
    Ok(pool)
}

/// A publisher as stored.
#[derive(Debug, Clone)]
pub struct Publisher {
    pub name: String,
    pub namespace: String,
    pub public_key: String,
}

/// Serializes namespace changes against publishing: `add_publisher` takes it exclusively,
/// `publish` shared, so a publish never decides ownership from a half-changed set of
/// namespaces. (An arbitrary constant; app locks use `hashtextextended` of the app id.)
const NAMESPACE_LOCK: i64 = 0x0061_6169_5f6e_7331;

/// Registers (or re-keys) a publisher of `namespace`.
///
/// A namespace below another's (`com.acme.labs` while `com.acme` exists) takes over the ids
/// below it, so it is refused while an app of another publisher lives there (outside any even
/// longer namespace of its own). Verifying the claim (`claims`) is the caller's part.
///
/// # Errors
/// The namespace belongs to another publisher, apps of others live below it, or the database
/// fails.
pub async fn add_publisher(pool: &PgPool, publisher: &Publisher) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(NAMESPACE_LOCK)
        .execute(&mut *tx)
        .await?;
    let holder: Option<String> =
        sqlx::query_scalar("SELECT name FROM publishers WHERE namespace = $1 AND name <> $2")
            .bind(&publisher.namespace)
            .bind(&publisher.name)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(holder) = holder {
        anyhow::bail!(
            "the namespace {} belongs to publisher {holder}",
            publisher.namespace
        );
    }
    // Re-keying keeps the namespace it had: nothing below it changes hands.
    let current: Option<String> =
        sqlx::query_scalar("SELECT namespace FROM publishers WHERE name = $1")
            .bind(&publisher.name)
            .fetch_optional(&mut *tx)
            .await?;
    let moved = current.as_deref() != Some(publisher.namespace.as_str());
    let foreign: Vec<(String, String)> = if !moved {
        Vec::new()
    } else {
        sqlx::query_as(
            "SELECT a.app_id, a.publisher FROM apps a
         WHERE starts_with(a.app_id, $1 || '.') AND a.publisher <> $2
           AND NOT EXISTS (SELECT 1 FROM publishers p
                           WHERE p.name <> $2 AND length(p.namespace) > length($1)
                             AND starts_with(a.app_id, p.namespace || '.'))
         ORDER BY a.app_id LIMIT 5",
        )
        .bind(&publisher.namespace)
        .bind(&publisher.name)
        .fetch_all(&mut *tx)
        .await?
    };
    if !foreign.is_empty() {
        let apps: Vec<String> = foreign
            .iter()
            .map(|(app, owner)| format!("{app} (publisher {owner})"))
            .collect();
        anyhow::bail!(
            "the namespace {} holds apps of other publishers: {}; it cannot be given to {}",
            publisher.namespace,
            apps.join(", "),
            publisher.name
        );
    }
    sqlx::query(
        "INSERT INTO publishers (name, namespace, public_key) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET namespace = excluded.namespace, public_key = excluded.public_key",
    )
    .bind(&publisher.name)
    .bind(&publisher.namespace)
    .bind(&publisher.public_key)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The publisher and namespace that own `app_id`: the longest registered namespace that is a
/// dot-prefix of it (`com.acme.labs.x` is `com.acme.labs`'s, not `com.acme`'s;
/// `com.acmefoo.x` is neither).
///
/// # Errors
/// The database fails.
pub async fn namespace_owner<'c>(
    executor: impl sqlx::PgExecutor<'c>,
    app_id: &str,
) -> sqlx::Result<Option<(String, String)>> {
    sqlx::query_as(
        "SELECT name, namespace FROM publishers WHERE starts_with($1, namespace || '.')
         ORDER BY length(namespace) DESC LIMIT 1",
    )
    .bind(app_id)
    .fetch_optional(executor)
    .await
}

/// A published version as semver, or why it is not one.
///
/// # Errors
/// The text is not a semantic version (`1.2.3`, `1.2.0-beta.1`).
pub fn parse_version(version: &str) -> Result<semver::Version, VersionError> {
    semver::Version::parse(version).map_err(|source| VersionError {
        version: version.to_owned(),
        source,
    })
}

/// A published version that is not semver.
#[derive(Debug, thiserror::Error)]
#[error(
    "\"version\": {version:?} is not a semantic version like 1.2.3 or 1.3.0-beta.1 ({source}); \"latest\" is the highest by semver"
)]
pub struct VersionError {
    version: String,
    source: semver::Error,
}

/// The publisher `name`.
///
/// # Errors
/// The database fails.
pub async fn publisher(pool: &PgPool, name: &str) -> sqlx::Result<Option<Publisher>> {
    let row = sqlx::query("SELECT name, namespace, public_key FROM publishers WHERE name = $1")
        .bind(name)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| Publisher {
        name: r.get(0),
        namespace: r.get(1),
        public_key: r.get(2),
    }))
}

/// What a key rotation did.
pub enum Rotated {
    Done,
    /// The publisher's key was no longer `old_key` (another rotation came first).
    Stale,
    /// `new_key` was this publisher's key once already.
    Reused,
}

/// Hands `name`'s apps from `old_key` to `new_key`, keeping the statement `signature` (by
/// `old_key`, checked by the caller) for clients that trusted an earlier key.
///
/// # Errors
/// The database fails.
pub async fn rotate_key(
    pool: &PgPool,
    name: &str,
    old_key: &str,
    new_key: &str,
    signature: &str,
) -> sqlx::Result<Rotated> {
    let mut tx = pool.begin().await?;
    let used: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM key_rotations WHERE publisher = $1 AND (old_key = $2 OR new_key = $2))",
    )
    .bind(name)
    .bind(new_key)
    .fetch_one(&mut *tx)
    .await?;
    if used || new_key == old_key {
        return Ok(Rotated::Reused);
    }
    let changed =
        sqlx::query("UPDATE publishers SET public_key = $3 WHERE name = $1 AND public_key = $2")
            .bind(name)
            .bind(old_key)
            .bind(new_key)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    if changed == 0 {
        return Ok(Rotated::Stale);
    }
    sqlx::query(
        "INSERT INTO key_rotations (publisher, old_key, new_key, signature) VALUES ($1, $2, $3, $4)",
    )
    .bind(name)
    .bind(old_key)
    .bind(new_key)
    .bind(signature)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Rotated::Done)
}

/// A publisher's key rotations, oldest first, as clients read them.
///
/// # Errors
/// The database fails.
pub async fn rotations(pool: &PgPool, name: &str) -> sqlx::Result<Vec<Value>> {
    let rows = sqlx::query(
        "SELECT old_key, new_key, signature, rotated_at::text FROM key_rotations WHERE publisher = $1 ORDER BY id",
    )
    .bind(name)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| {
            json!({
                "old_key": r.get::<String, _>(0),
                "new_key": r.get::<String, _>(1),
                "signature": r.get::<String, _>(2),
                "rotated_at": r.get::<String, _>(3),
            })
        })
        .collect())
}

/// A version to store.
pub struct NewVersion<'a> {
    pub publisher: &'a str,
    pub descriptor: &'a aai_descriptor::Descriptor,
    pub version: &'a str,
    pub text: &'a str,
    pub signature: &'a str,
    pub sha256: &'a str,
}

/// What publishing did.
pub enum Published {
    New,
    /// This exact version was there already (with these very bytes: nothing changed).
    Same,
    /// This version was there with other bytes.
    Conflict,
    /// The version is not semver: the reason.
    InvalidVersion(VersionError),
    /// The app id is not under a namespace of this publisher: the owner (publisher, namespace)
    /// of the longest namespace above it, if any.
    OutsideNamespace(Option<(String, String)>),
    /// The app exists and belongs to this other publisher.
    NotPublisher(String),
    /// Another version of equal semver precedence (differing only in build metadata) exists.
    SamePrecedence(String),
}

/// Stores a version, in one transaction; it becomes the app's latest (and its name,
/// description, tools and search words the app's) only when it is the highest by semver, so a
/// fix published on an older line never rolls the app back.
///
/// Ownership is decided inside the transaction: the publisher must own the longest namespace
/// above the app id, and an existing app takes versions only from its recorded publisher.
///
/// # Errors
/// The database fails.
pub async fn publish(pool: &PgPool, new: &NewVersion<'_>) -> sqlx::Result<Published> {
    let d = new.descriptor;
    let version = match parse_version(new.version) {
        Ok(version) => version,
        Err(reason) => return Ok(Published::InvalidVersion(reason)),
    };
    let mut tx = pool.begin().await?;
    sqlx::query(
        "SELECT pg_advisory_xact_lock_shared($1), pg_advisory_xact_lock(hashtextextended($2, 0))",
    )
    .bind(NAMESPACE_LOCK)
    .bind(&d.app_id)
    .execute(&mut *tx)
    .await?;
    let owner = namespace_owner(&mut *tx, &d.app_id).await?;
    if owner.as_ref().is_none_or(|(name, _)| name != new.publisher) {
        return Ok(Published::OutsideNamespace(owner));
    }
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT publisher FROM apps WHERE app_id = $1")
            .bind(&d.app_id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(recorded) = recorded.filter(|p| p != new.publisher) {
        return Ok(Published::NotPublisher(recorded));
    }
    let existing: Option<String> =
        sqlx::query_scalar("SELECT sha256 FROM versions WHERE app_id = $1 AND version = $2")
            .bind(&d.app_id)
            .bind(new.version)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(existing) = existing {
        return Ok(if existing == new.sha256 {
            Published::Same
        } else {
            Published::Conflict
        });
    }
    let others: Vec<String> = sqlx::query_scalar("SELECT version FROM versions WHERE app_id = $1")
        .bind(&d.app_id)
        .fetch_all(&mut *tx)
        .await?;
    // Rows from before versions had to be semver take no part in the order.
    let others: Vec<(semver::Version, String)> = others
        .into_iter()
        .filter_map(|text| Some((semver::Version::parse(&text).ok()?, text)))
        .collect();
    if let Some((_, same)) = others
        .iter()
        .find(|(other, _)| other.cmp_precedence(&version).is_eq())
    {
        return Ok(Published::SamePrecedence(same.clone()));
    }
    let highest = others
        .iter()
        .all(|(other, _)| other.cmp_precedence(&version).is_lt());
    if highest {
        make_latest(&mut tx, new).await?;
    }
    sqlx::query(
        "INSERT INTO versions (app_id, version, descriptor, signature, sha256) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&d.app_id)
    .bind(new.version)
    .bind(new.text)
    .bind(new.signature)
    .bind(new.sha256)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Published::New)
}

/// Makes `new` the app's latest: its row (created for a new app) takes the version's name,
/// description, tools and search words.
async fn make_latest(conn: &mut sqlx::PgConnection, new: &NewVersion<'_>) -> sqlx::Result<()> {
    let d = new.descriptor;
    let platforms: Vec<String> = aai_descriptor::Platform::ALL
        .iter()
        .filter(|p| d.tools(**p).is_some())
        .map(|p| p.key().to_owned())
        .collect();
    let mut tools: Vec<String> = platforms
        .iter()
        .filter_map(|key| {
            aai_descriptor::Platform::ALL
                .iter()
                .find(|p| p.key() == key)
        })
        .flat_map(|p| d.tools(*p).unwrap_or_default())
        .map(|t| t.name.clone())
        .collect();
    tools.sort();
    tools.dedup();
    // What typos are matched against: the names people call the app and its tools by (not
    // the description: trigrams of long text match too much and cost too much; not the id's
    // namespace, which every app of the publisher shares). migrations/0002 makes the same.
    let words = format!(
        "{} {} {} {}",
        d.app_id.rsplit('.').next().unwrap_or_default(),
        d.name,
        d.aliases.join(" "),
        tools.join(" ")
    )
    .to_lowercase();
    sqlx::query(
        "INSERT INTO apps (app_id, publisher, name, description, aliases, tools, platforms, latest, words, doc)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
           setweight(to_tsvector('english', $3 || ' ' || replace($1, '.', ' ')), 'A')
           || setweight(to_tsvector('english', array_to_string($5, ' ')), 'A')
           || setweight(to_tsvector('english', replace(array_to_string($6, ' '), '_', ' ')), 'B')
           || setweight(to_tsvector('english', $4), 'C'))
         ON CONFLICT (app_id) DO UPDATE SET
           name = excluded.name, description = excluded.description, aliases = excluded.aliases,
           tools = excluded.tools, platforms = excluded.platforms, latest = excluded.latest,
           words = excluded.words, doc = excluded.doc, updated_at = now()",
    )
    .bind(&d.app_id)
    .bind(new.publisher)
    .bind(&d.name)
    .bind(&d.description)
    .bind(&d.aliases)
    .bind(&tools)
    .bind(&platforms)
    .bind(new.version)
    .bind(&words)
    .execute(conn)
    .await?;
    Ok(())
}

/// Every app: appId, name and latest version, by appId.
///
/// # Errors
/// The database fails.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<(String, String, String)>> {
    let rows = sqlx::query("SELECT app_id, name, latest FROM apps ORDER BY app_id")
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect())
}

/// The typo pass of [`search`]: `$1` the [`typo_words`] of the query, `$2` how many, `$3`
/// the app ids full text found already. Public so tests can EXPLAIN the very text that runs.
pub const TYPO_SEARCH: &str =
    "SELECT app_id, name, description, latest, platforms, tools, publisher, word_similarity(lower($1), words) AS score
     FROM apps
     WHERE lower($1) <% words AND NOT (app_id = ANY($3))
     ORDER BY score DESC, app_id
     LIMIT $2";

/// Ranked search: full text over names, aliases, tool names and descriptions (weighted in
/// that order); when that finds fewer than `limit`, trigram word similarity fills up the rest
/// (typos), so the costlier typo match runs only for queries the words alone do not answer.
///
/// # Errors
/// The database fails.
pub async fn search(pool: &PgPool, query: &str, limit: i64) -> sqlx::Result<Vec<Value>> {
    const COLUMNS: &str = "app_id, name, description, latest, platforms, tools, publisher";
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS}, ts_rank_cd(doc, q) AS score
         FROM apps, websearch_to_tsquery('english', $1) q
         WHERE doc @@ q
         ORDER BY score DESC, app_id
         LIMIT $2"
    )))
    .bind(query)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let found = i64::try_from(rows.len()).unwrap_or(i64::MAX);
    let typo = typo_words(query);
    if found < limit && !typo.is_empty() {
        let seen: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        let typos = sqlx::query(TYPO_SEARCH)
            .bind(&typo)
            .bind(limit - found)
            .bind(&seen)
            .fetch_all(pool)
            .await?;
        rows.extend(typos);
    }
    Ok(rows
        .into_iter()
        .map(|r| {
            json!({
                "appId": r.get::<String, _>(0),
                "name": r.get::<String, _>(1),
                "description": r.get::<String, _>(2),
                "version": r.get::<String, _>(3),
                "platforms": r.get::<Vec<String>, _>(4),
                "tools": r.get::<Vec<String>, _>(5),
                "publisher": r.get::<String, _>(6),
                "score": r.get::<f32, _>(7),
            })
        })
        .collect())
}

/// The words of `query` a typo can be matched in: pg_trgm's words (runs of letters and
/// digits) of three characters or more. Shorter words give only the trigrams a word starts
/// with, which nearly every app shares (`a` matched all 10,000), and a punctuation-only query
/// gives none, which GIN answers by reading the whole index; those are left to full text,
/// and a query with no such word has no typo pass.
pub fn typo_words(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// An app with its versions (highest semver first), or `None`.
///
/// # Errors
/// The database fails.
pub async fn app(pool: &PgPool, app_id: &str) -> sqlx::Result<Option<Value>> {
    let Some(row) = sqlx::query(
        "SELECT a.app_id, a.name, a.description, a.aliases, a.tools, a.platforms, a.latest, a.publisher, p.public_key, p.namespace
         FROM apps a JOIN publishers p ON p.name = a.publisher WHERE a.app_id = $1",
    )
    .bind(app_id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let mut versions = sqlx::query(
        "SELECT version, sha256, published_at::text FROM versions WHERE app_id = $1 ORDER BY published_at DESC, version DESC",
    )
    .bind(app_id)
    .fetch_all(pool)
    .await?;
    // Highest semver first (what "latest" is); rows that are not semver last, newest first
    // (the sort is stable).
    versions.sort_by_cached_key(|v| {
        std::cmp::Reverse(semver::Version::parse(&v.get::<String, _>(0)).ok())
    });
    let publisher: String = row.get(7);
    let rotations = rotations(pool, &publisher).await?;
    Ok(Some(json!({
        "appId": row.get::<String, _>(0),
        "name": row.get::<String, _>(1),
        "description": row.get::<String, _>(2),
        "aliases": row.get::<Vec<String>, _>(3),
        "tools": row.get::<Vec<String>, _>(4),
        "platforms": row.get::<Vec<String>, _>(5),
        "latest": row.get::<String, _>(6),
        "publisher": {"name": publisher, "public_key": row.get::<String, _>(8), "namespace": row.get::<String, _>(9), "rotations": rotations},
        "versions": versions.iter().map(|v| json!({
            "version": v.get::<String, _>(0), "sha256": v.get::<String, _>(1), "published_at": v.get::<String, _>(2)
        })).collect::<Vec<_>>(),
    })))
}

/// A version as served: its exact descriptor text, signature and version, and the app's
/// latest version.
pub struct Served {
    pub text: String,
    pub signature: String,
    pub version: String,
    pub latest: String,
}

/// A version's exact descriptor text and signature (`latest` when `version` is `None`).
///
/// # Errors
/// The database fails.
pub async fn descriptor(
    pool: &PgPool,
    app_id: &str,
    version: Option<&str>,
) -> sqlx::Result<Option<Served>> {
    let row = sqlx::query(
        "SELECT v.descriptor, v.signature, v.version, a.latest FROM versions v JOIN apps a ON a.app_id = v.app_id
         WHERE v.app_id = $1 AND v.version = COALESCE($2, a.latest)",
    )
    .bind(app_id)
    .bind(version)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Served {
        text: r.get(0),
        signature: r.get(1),
        version: r.get(2),
        latest: r.get(3),
    }))
}
