//! `lockstep run` and `lockstep make-tiny`: load, encode, prefill, decode, stream text, print the token hash.
