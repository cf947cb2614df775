//! Reference models of the framings, for tests and fuzzing, not for
//! production use: each is written for obviousness over the whole input at
//! once, so the streaming decoders can be checked against it. Behind the
//! `testing` feature.

pub mod content_length;
