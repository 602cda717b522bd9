//! Authenticated runs (docs/security.md): libpccl reads `PCCL_RUN_TOKEN` when a master is
//! created and at each `connect`; a peer without the master's token, with another one, or with
//! one an open master lacks gets `Error::AuthenticationFailed`. Its own test binary: the
//! environment is the process's, and the tests of one binary run on parallel threads.
mod common;

use common::*;
use pccl::{Communicator, Error};

const TOKEN_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const TOKEN_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn connect_result(addr: &str) -> pccl::Result<()> {
    let mut c = Communicator::with_options(addr, &options(0)).expect("create communicator");
    c.connect()
}

#[test]
fn run_token_mismatch_is_authentication_failed() {
    bounded(60, || {
        std::env::set_var("PCCL_RUN_TOKEN", TOKEN_A);
        let (_m, addr) = master();
        std::env::remove_var("PCCL_RUN_TOKEN");
        assert_eq!(connect_result(&addr), Err(Error::AuthenticationFailed));
        std::env::set_var("PCCL_RUN_TOKEN", TOKEN_B);
        let e = connect_result(&addr).unwrap_err();
        assert_eq!(e, Error::AuthenticationFailed);
        assert_eq!(e.code(), 18);
        assert_eq!(e.name(), "pcclAuthenticationFailed");
        assert_eq!(e.message(), "authentication failed");
        assert!(!e.is_retryable());
        std::env::remove_var("PCCL_RUN_TOKEN");
        let (_open, open_addr) = master();
        std::env::set_var("PCCL_RUN_TOKEN", TOKEN_A);
        assert_eq!(connect_result(&open_addr), Err(Error::AuthenticationFailed));
        std::env::remove_var("PCCL_RUN_TOKEN");
    });
}
