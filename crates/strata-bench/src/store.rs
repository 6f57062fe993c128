//! What the harness needs of an engine; implemented for Strata here and for peers behind the
//! `peers` feature, so every engine runs the same generator in the same process.

use std::path::Path;

/// An engine under test.
pub trait BenchStore: Send + Sync {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Stores a value.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Returns whether the key was found.
    fn get(&self, key: &[u8]) -> Result<bool, String>;
    /// Deletes a key.
    fn delete(&self, key: &[u8]) -> Result<(), String>;
    /// Finishes background work and closes.
    fn close(self: Box<Self>) -> Result<(), String>;
    /// Write amplification so far, if the engine reports it.
    fn write_amplification(&self) -> Option<f64> {
        None
    }
}

/// Strata under test.
pub struct StrataStore {
    db: strata::Db,
}

impl StrataStore {
    /// Opens Strata in `dir`.
    pub fn open(dir: &Path, opts: strata::Options) -> Result<Self, String> {
        Ok(StrataStore {
            db: strata::Db::open(dir, opts).map_err(|e| e.to_string())?,
        })
    }
}

impl BenchStore for StrataStore {
    fn name(&self) -> &'static str {
        "strata"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db.put(key, value).map_err(|e| e.to_string())
    }
    fn get(&self, key: &[u8]) -> Result<bool, String> {
        self.db
            .get(key)
            .map(|v| v.is_some())
            .map_err(|e| e.to_string())
    }
    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.db.delete(key).map_err(|e| e.to_string())
    }
    fn close(self: Box<Self>) -> Result<(), String> {
        self.db.close().map_err(|e| e.to_string())
    }
    fn write_amplification(&self) -> Option<f64> {
        Some(self.db.stats().write_amplification())
    }
}
