//! `herald store`: the store as a whole. `migrate --from-sqlite` copies this home's
//! SQLite inbox and session stores (and its profiles') into the PostgreSQL store that
//! `store:` names.

use crate::stores;
use anyhow::Context;
use clap::Subcommand;
use herald_config::{Config, Home, StoreBackend, load_dotenv, process_env};
use herald_store::export::{Export, Source};
use std::io::Write;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Copy this home's SQLite stores (herald.db, state.db and each profile's
    /// state.db) into the PostgreSQL store of `store:`. Row ids are kept; running it
    /// again skips what is already copied, so a run cut off is finished by running it
    /// again. The SQLite files are only read (a copy is read when they have a log
    /// beside them or an older schema).
    Migrate {
        /// Copy from the home's SQLite files (the only source there is).
        #[arg(long)]
        from_sqlite: bool,
    },
}

pub fn run(home: &Home, command: StoreCommand) -> anyhow::Result<ExitCode> {
    let StoreCommand::Migrate { from_sqlite } = command;
    if !from_sqlite {
        eprintln!("herald: say where from: herald store migrate --from-sqlite");
        return Ok(ExitCode::from(2));
    }
    load_dotenv(home)?;
    let config = Config::load(home, &process_env).context("cannot read the configuration")?;
    let StoreBackend::Postgres(pg) = &config.store.backend else {
        eprintln!(
            "herald: store.url is not set: name the PostgreSQL database to copy into (store: {{url: postgres://...}} or HERALD_STORE_URL)"
        );
        return Ok(ExitCode::from(2));
    };
    let rt = stores::runtime()?;
    let mut progress = |p: herald_scale::import::Progress<'_>| {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r  {}: {}/{} rows", p.table, p.done, p.total);
        if p.done >= p.total {
            let _ = writeln!(err);
        }
    };
    // Every source is opened (checked, and copied first when it must be) before
    // anything is written: a damaged one stops the command with nothing copied.
    let inbox = home.database_file();
    let inbox = match inbox.exists() {
        true => Some((Export::open(&inbox, Source::Inbox)?, inbox)),
        false => None,
    };
    let mut sessions = Vec::new();
    let mut homes = vec![(None, home.clone())];
    if let Ok(entries) = std::fs::read_dir(home.profiles_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            homes.push((Some(name), Home::new(entry.path())));
        }
    }
    for (profile, h) in homes {
        let state = h.state_db_file();
        if state.exists() {
            sessions.push((profile, Export::open(&state, Source::Sessions)?, state));
        }
    }
    if let Some((source, path)) = &inbox {
        outln!(
            "Copying the inbox {} into {}",
            path.display(),
            pg.display_url()
        );
        if let Some(note) = source.note() {
            outln!("  {note}");
        }
        rt.block_on(herald_scale::import::import_inbox(
            pg,
            source,
            &mut progress,
        ))?;
    }
    for (profile, source, path) in &sessions {
        let which = profile.as_deref().unwrap_or("default");
        outln!(
            "Copying the sessions of profile {which} ({})",
            path.display()
        );
        if let Some(note) = source.note() {
            outln!("  {note}");
        }
        rt.block_on(herald_scale::import::import_sessions(
            pg,
            source,
            profile.as_deref(),
            &mut progress,
        ))?;
    }
    outln!("Done. The SQLite files are left as they were.");
    Ok(ExitCode::SUCCESS)
}
