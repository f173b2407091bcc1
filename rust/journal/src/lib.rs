//! Append-only journal (placeholder until the journal lands).
