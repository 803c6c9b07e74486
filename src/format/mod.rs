//! Pure format code: types and parsers for Debian's text formats. Nothing in
//! here touches the network or the filesystem, prints, or keeps global state;
//! every function takes text or values and returns values.

pub mod clearsign;
pub mod control;
pub mod date;
pub mod deb822;
pub mod field;
pub mod packages;
pub mod path;
pub mod preferences;
pub mod relation;
pub mod release;
pub mod scripts;
pub mod version;

pub use deb822::{ControlParagraph, Document};
pub use relation::Relations;
pub use version::Version;
