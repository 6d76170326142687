//! herald-scale's tests: the store's one suite on a throwaway PostgreSQL cluster, and
//! what only PostgreSQL does (connecting, migrating, waking other instances).

mod suite;
