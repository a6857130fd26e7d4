//! Integration tests: the real server on a loopback port, driven through its public HTTP
//! interface; every JSON body is checked against `schema/byre.openapi.yaml`. One binary
//! (all modules linked once).

mod helpers;
mod schema;

mod blobs;
mod contract;
mod events;
mod me;
mod projects;
mod tasks;
mod workflows;
