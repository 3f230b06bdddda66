//! The page in a real browser (see below).
