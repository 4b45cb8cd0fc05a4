-- The app store: publishers own an appId namespace; each app keeps every published version
-- with its exact signed bytes; search reads a weighted full-text document and a trigram index.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE publishers (
    name TEXT PRIMARY KEY,
    namespace TEXT NOT NULL UNIQUE,
    public_key TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE apps (
    app_id TEXT PRIMARY KEY,
    publisher TEXT NOT NULL REFERENCES publishers (name),
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    aliases TEXT[] NOT NULL DEFAULT '{}',
    tools TEXT[] NOT NULL DEFAULT '{}',
    platforms TEXT[] NOT NULL DEFAULT '{}',
    latest TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    words TEXT NOT NULL,
    doc TSVECTOR NOT NULL
);
CREATE INDEX apps_doc ON apps USING GIN (doc);
CREATE INDEX apps_words ON apps USING GIN (words gin_trgm_ops);

CREATE TABLE versions (
    app_id TEXT NOT NULL REFERENCES apps (app_id),
    version TEXT NOT NULL,
    descriptor TEXT NOT NULL,
    signature TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    published_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, version)
);
