//! Test-only switches: the fuzz targets' planted bugs, the server's injected faults, and the test addresses the image fetcher may reach. Without the `testing` feature every switch is a constant `false` and arming one is refused.

/// Whether this build carries the switches (`--features testing`).
pub const COMPILED: bool = cfg!(feature = "testing");

#[cfg(feature = "testing")]
mod on {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    static ANY_PLANTED: AtomicBool = AtomicBool::new(false);
    static PLANTED: Mutex<Option<String>> = Mutex::new(None);
    static ANY_FAULT: AtomicBool = AtomicBool::new(false);
    static FAULTS: Mutex<Option<HashMap<String, (u64, u64)>>> = Mutex::new(None);

    pub fn planted(name: &str) -> bool {
        ANY_PLANTED.load(Ordering::Relaxed) && PLANTED.lock().unwrap_or_else(|p| p.into_inner()).as_deref() == Some(name)
    }

    pub fn plant(name: Option<&str>) {
        *PLANTED.lock().unwrap_or_else(|p| p.into_inner()) = name.map(str::to_string);
        ANY_PLANTED.store(name.is_some(), Ordering::Relaxed);
    }

    pub fn fault(name: &str) -> bool {
        if !ANY_FAULT.load(Ordering::Relaxed) {
            return false;
        }
        let mut g = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
        let Some((skip, fire)) = g.as_mut().and_then(|m| m.get_mut(name)) else { return false };
        if *skip > 0 {
            *skip -= 1;
            return false;
        }
        if *fire == 0 {
            return false;
        }
        *fire -= 1;
        true
    }

    pub fn arm(name: &str, skip: u64, fire: u64) {
        FAULTS.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(HashMap::new).insert(name.to_string(), (skip, fire));
        ANY_FAULT.store(true, Ordering::Relaxed);
    }
}

/// Whether the planted bug named `name` is switched on (a fuzz run with `--planted`).
#[inline]
pub fn planted(name: &str) -> bool {
    #[cfg(feature = "testing")]
    return on::planted(name);
    #[cfg(not(feature = "testing"))]
    {
        let _ = name;
        false
    }
}

/// Switches on the planted bug `name` (or none); refused in a build without the switches.
pub fn plant(name: Option<&str>) -> Result<(), &'static str> {
    #[cfg(feature = "testing")]
    {
        on::plant(name);
        Ok(())
    }
    #[cfg(not(feature = "testing"))]
    {
        let _ = name;
        Err("this build has no planted bugs: build with `--features testing`")
    }
}

/// Whether the fault `name` fires now: each armed fault passes its first `skip` checks, then fires `fire` times.
#[inline]
pub fn fault(name: &str) -> bool {
    #[cfg(feature = "testing")]
    return on::fault(name);
    #[cfg(not(feature = "testing"))]
    {
        let _ = name;
        false
    }
}

/// Arms the fault `name`; refused in a build without the switches.
pub fn arm(name: &str, skip: u64, fire: u64) -> Result<(), &'static str> {
    #[cfg(feature = "testing")]
    {
        on::arm(name, skip, fire);
        Ok(())
    }
    #[cfg(not(feature = "testing"))]
    {
        let _ = (name, skip, fire);
        Err("this build has no fault switches: build with `--features testing`")
    }
}

/// Arms the faults of a spec `NAME[@SKIP][:FIRE],...` (from `LOCKSTEP_FAULTS`).
pub fn arm_spec(spec: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (head, fire) = match part.rsplit_once(':') {
            Some((h, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => (h, n.parse::<u64>().map_err(|e| format!("`{part}`: {e}"))?),
            _ => (part, 1),
        };
        let (name, skip) = match head.split_once('@') {
            Some((n, s)) => (n, s.parse::<u64>().map_err(|e| format!("`{part}`: {e}"))?),
            None => (head, 0),
        };
        if !FAULTS.contains(&name) {
            return Err(format!("unknown fault `{name}`; the faults are {}", FAULTS.join(", ")));
        }
        arm(name, skip, fire).map_err(str::to_string)?;
        names.push(name.to_string());
    }
    Ok(names)
}

/// Every fault the server can inject.
pub const FAULTS: &[&str] = &["device_round", "snapshot_write", "snapshot_slow"];

/// Addresses the image URL fetcher may reach though they are not public (a test's loopback server).
#[cfg(feature = "testing")]
static FETCH_ALLOWED: std::sync::Mutex<Vec<std::net::SocketAddr>> = std::sync::Mutex::new(Vec::new());

/// Lets the image URL fetcher reach the `IP:PORT` addresses of a comma-separated `spec` (from `LOCKSTEP_FETCH_ALLOW`); refused in a build without the switches.
pub fn allow_fetch(spec: &str) -> Result<Vec<std::net::SocketAddr>, String> {
    #[cfg(feature = "testing")]
    {
        let addrs = spec.split(',').map(str::trim).filter(|p| !p.is_empty()).map(|p| p.parse().map_err(|e| format!("`{p}`: {e}"))).collect::<Result<Vec<std::net::SocketAddr>, String>>()?;
        FETCH_ALLOWED.lock().unwrap_or_else(|p| p.into_inner()).extend(&addrs);
        Ok(addrs)
    }
    #[cfg(not(feature = "testing"))]
    {
        let _ = spec;
        Err("this build fetches images only from public addresses: build with `--features testing` to allow others".into())
    }
}

/// Whether the image URL fetcher may reach `addr` past the public-address rule (never without the switches).
#[inline]
pub fn fetch_allowed(addr: std::net::SocketAddr) -> bool {
    #[cfg(feature = "testing")]
    return FETCH_ALLOWED.lock().unwrap_or_else(|p| p.into_inner()).contains(&addr);
    #[cfg(not(feature = "testing"))]
    {
        let _ = addr;
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_spec_names_only_known_faults() {
        assert!(super::arm_spec("no_such_fault").unwrap_err().contains("unknown fault"));
        assert!(super::arm_spec("device_round@x").is_err());
    }
}
