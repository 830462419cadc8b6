-- The paper library: papers, their section-aware chunks (with FTS5), notes, the Sesame cache.
-- Vector tables (vec0, one per embedding dimension) are created by store/chunks.py when needed.
CREATE TABLE IF NOT EXISTS papers (
    id TEXT PRIMARY KEY,
    arxiv_id TEXT,
    arxiv_version TEXT,
    doi TEXT,
    bibcode TEXT,
    title TEXT NOT NULL DEFAULT '',
    authors TEXT NOT NULL DEFAULT '[]',
    year INTEGER,
    journal TEXT NOT NULL DEFAULT '',
    abstract TEXT NOT NULL DEFAULT '',
    keywords TEXT NOT NULL DEFAULT '[]',
    citation_count INTEGER,
    url TEXT NOT NULL DEFAULT '',
    pdf_path TEXT,
    markdown_path TEXT,
    state TEXT NOT NULL DEFAULT 'metadata',
    source TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE UNIQUE INDEX IF NOT EXISTS papers_arxiv ON papers (arxiv_id) WHERE arxiv_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS papers_doi ON papers (lower(doi)) WHERE doi IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS papers_bibcode ON papers (bibcode) WHERE bibcode IS NOT NULL;

CREATE TABLE IF NOT EXISTS paper_chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    paper_id TEXT NOT NULL REFERENCES papers (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    section TEXT NOT NULL DEFAULT '',
    page_start INTEGER,
    page_end INTEGER,
    text TEXT NOT NULL,
    UNIQUE (paper_id, seq)
);

CREATE VIRTUAL TABLE IF NOT EXISTS paper_chunks_fts USING fts5 (
    text, section, content='paper_chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS paper_chunks_ai AFTER INSERT ON paper_chunks BEGIN
    INSERT INTO paper_chunks_fts (rowid, text, section) VALUES (new.id, new.text, new.section);
END;
CREATE TRIGGER IF NOT EXISTS paper_chunks_ad AFTER DELETE ON paper_chunks BEGIN
    INSERT INTO paper_chunks_fts (paper_chunks_fts, rowid, text, section) VALUES ('delete', old.id, old.text, old.section);
END;

CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    paper_id TEXT REFERENCES papers (id) ON DELETE SET NULL,
    session_id TEXT,
    page INTEGER,
    section TEXT NOT NULL DEFAULT '',
    quote TEXT NOT NULL DEFAULT '',
    comment TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS notes_paper ON notes (paper_id);

CREATE TABLE IF NOT EXISTS sesame_cache (
    query TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    fetched_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
