-- A publisher's key changes only through a statement signed by its previous key; every such
-- statement is kept, in order, so a client that trusted any earlier key can walk to the current.
CREATE TABLE key_rotations (
    id BIGSERIAL PRIMARY KEY,
    publisher TEXT NOT NULL REFERENCES publishers (name),
    old_key TEXT NOT NULL,
    new_key TEXT NOT NULL,
    signature TEXT NOT NULL,
    rotated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (publisher, old_key)
);
