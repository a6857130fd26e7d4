//! The operations on the users' machines (`connectClient`, `getClientTransfer`,
//! `putClientTransfer`); the registry itself, its requests and transfers are byre-machines.
//! The agents' tools that use the machines are [`super::tools::machine`].

use byre_machines::{Connection, Receiving};

use super::{Ctx, Error};

/// `connectClient`: registers `host`'s connection for `login` (replacing an older one of the
/// same login and host), listed in `getStatus`'s `clients` while connected.
/// # Errors
/// [`Error::Invalid`] for an empty host (no `Byre-Host` header).
pub fn connect(app: &Ctx, login: &str, host: &str, commit: &str) -> Result<Connection, Error> {
    let listed = Box::new(app.streams.open_machine(login, host.trim(), commit));
    Ok(app.machines.connect(login, host, listed)?)
}

/// `getClientTransfer`: the upload archive of transfer `id`, opened for reading, for `login`.
/// # Errors
/// [`Error::NotFound`] unless `id` is an upload whose request waits, sent to a machine of
/// `login` (to another login it does not exist).
pub async fn get_transfer(app: &Ctx, login: &str, id: &str) -> Result<tokio::fs::File, Error> {
    Ok(byre_machines::get_transfer(&app.machines, login, id).await?)
}

/// `putClientTransfer`: starts receiving transfer `id`'s archive from `login`, once.
/// # Errors
/// [`Error::NotFound`] unless `id` is a download whose request waits, sent to a machine of
/// `login`, and whose archive has not come yet.
pub async fn put_transfer(app: &Ctx, login: &str, id: &str) -> Result<Receiving, Error> {
    Ok(byre_machines::put_transfer(&app.machines, &app.settings.data_dir, login, id).await?)
}

impl From<byre_machines::Error> for Error {
    fn from(e: byre_machines::Error) -> Self {
        match e {
            byre_machines::Error::Invalid(m) => Error::Invalid(m),
            byre_machines::Error::NotFound(m) => Error::NotFound(m),
            byre_machines::Error::TooLarge(m) => Error::TooLarge(m),
            byre_machines::Error::Internal(m) => Error::Internal(m),
        }
    }
}
