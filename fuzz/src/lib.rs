//! Support for the fuzz targets of the engine's on-disk decoders: an in-memory file system
//! ([`memfs`]), just enough of the file formats to keep checksums valid after mutation
//! ([`format`]), template stores and the per-input exercise ([`store`]), the targets' bodies
//! and seeds ([`targets`]), and a global allocator that turns an allocation over the memory
//! limit into a crash ([`alloc_guard`]). The binaries in `fuzz_targets/` are one call each into
//! [`targets`].

pub mod alloc_guard;
pub mod format;
pub mod memfs;
pub mod store;
pub mod targets;
