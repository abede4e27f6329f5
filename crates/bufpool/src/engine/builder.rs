//! [`EngineBuilder`]: the embedder's door with knobs (`Engine::builder(path)`).
//!
//! Owns: nothing but the choices before an open: the directory, the typed knobs (every
//! [`ConfigBuilder`] setter, forwarded from the same list so the two never drift), knobs
//! by name, the file system (the real one by default) and whether a missing database is
//! created. Opening is [`Engine::open_vfs`]'s.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Engine, EngineError};
use crate::buffer::{BgwriterIo, BgwriterStrategy, ReplacementPolicy};
use crate::config::{ConfigBuilder, HugePages, SeqscanStrategy};
use crate::slru::SlruDesign;
use crate::vfs::aio::IoMethod;
use crate::vfs::{RealVfs, Vfs};
use crate::wal::SyncMethod;

/// Chooses how [`Engine::builder`]'s database is opened; [`EngineBuilder::open`] opens it.
#[must_use = "a builder does nothing until `open` is called"]
pub struct EngineBuilder {
    pub(super) path: PathBuf,
    pub(super) config: ConfigBuilder,
    /// Knobs by name, applied after the typed ones, in order.
    pub(super) named: Vec<(String, String)>,
    pub(super) vfs: Option<Arc<dyn Vfs>>,
    pub(super) create: bool,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("path", &self.path)
            .field("named", &self.named)
            .field("custom_vfs", &self.vfs.is_some())
            .field("create", &self.create)
            .finish_non_exhaustive()
    }
}

/// One forwarding setter per typed knob of [`ConfigBuilder`].
macro_rules! forwarders {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $set:expr;)*) => {
        $( $(#[$doc])* pub fn $name(mut self, $v: $ty) -> Self {
            self.config = self.config.$name($v);
            self
        } )*
    };
}

impl EngineBuilder {
    crate::config::with_config_setters!(forwarders);

    /// Sets knob `name` from its text, as in `bufpool.conf` (`"64MB"`, `"on"`, `"30s"`).
    /// Checked at [`EngineBuilder::open`]: a bad name or value is an error naming the knob
    /// and what it allows.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.named.push((name.into(), value.into()));
        self
    }

    /// Every knob at once, from a [`ConfigBuilder`] (replacing the typed knobs set so far).
    pub fn config(mut self, config: ConfigBuilder) -> Self {
        self.config = config;
        self
    }

    /// The file system to open on (default: the real one, [`RealVfs`]).
    pub fn vfs(mut self, vfs: Arc<dyn Vfs>) -> Self {
        self.vfs = Some(vfs);
        self
    }

    /// Whether a missing database is created (default: true). With false, opening a
    /// directory that holds no database is an error.
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Opens the database: knobs validated (a bad one is [`EngineError::Config`], naming
    /// it), the directory created if asked and absent, a crash recovered from.
    pub fn open(self) -> Result<Engine, EngineError> {
        let mut config = self.config;
        for (name, value) in &self.named {
            config = config.set(name, value)?;
        }
        let config = config.build()?;
        let vfs = self.vfs.unwrap_or_else(|| Arc::new(RealVfs::new()));
        Engine::open_vfs(vfs, &self.path, &config, self.create)
    }
}
