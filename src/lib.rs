//! byre
