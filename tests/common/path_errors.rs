//! The exact messages of `InvalidPath`, as the tests expect them.

pub const EMPTY: &str = "the path is empty";
pub const RELATIVE: &str = "the path must start with '/'";
pub const TRAILING: &str = "the path must not end with '/'";
pub const DOUBLE: &str = "the path contains an empty segment ('//')";
pub const DOT: &str = "the path contains a '.' segment";
pub const DOT_DOT: &str = "the path contains a '..' segment";
pub const NUL: &str = "the path contains a NUL character";
pub const CONTROL: &str = "the path contains a control or reserved character (U+0001-U+001F, U+007F-U+009F, U+E000-U+F8FF or U+FFF0-U+FFFF)";
pub const SUPPLEMENTARY: &str =
    "the path contains a character above U+FFFF, which the server refuses (as UTF-16 surrogates)";
