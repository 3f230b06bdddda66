//! The one integration-test binary.

mod registry_logic;
