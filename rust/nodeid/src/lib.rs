//! server.lock (placeholder).
