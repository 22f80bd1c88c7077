//! A private network namespace for a process whose network goes through Ravi's egress proxy.
//!
//! In the child, between `fork` and `exec`: a new network namespace (and a user namespace
//! mapping the caller's own ids, when not root), its loopback brought up, a listener on
//! `127.0.0.1:`[`PROXY_PORT`] made there and handed to the parent over a socket pair. The
//! namespace has no other interface: the process reaches nothing but that listener, whose
//! other end is the proxy in the parent ([`crate::proxy`]), which decides per destination.
//! Its loopback is its own, so the host's `127.0.0.1` services are out of reach unless the
//! proxy forwards there (`loopback = true`).
//!
//! Everything in the child is a raw system call on buffers built in the parent: no
//! allocation after `fork`. The `libc` calls are written out because no crate offers an
//! allocation-free "set up a namespace's loopback and pass a listener" step.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

/// The proxy's port inside the namespace (the namespace is private, so any port is free).
pub const PROXY_PORT: u16 = 3128;

/// What the child runs before `exec`, built before `fork`.
#[derive(Debug, Clone)]
pub(crate) struct NetEnter {
    /// `uid_map`, `gid_map` lines for a user namespace mapping the caller's own ids.
    maps: (Vec<u8>, Vec<u8>),
    /// Root may make the network namespace alone; others (and root without `CAP_SYS_ADMIN`)
    /// make a user namespace with it.
    root: bool,
    /// The child's end of the socket pair, inherited through `fork`.
    child_fd: RawFd,
}

/// The parent's side: both ends of the socket pair, until the child has run.
#[derive(Debug)]
pub(crate) struct NetParent {
    child_end: OwnedFd,
    parent_end: OwnedFd,
}

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The socket pair and the id maps.
pub(crate) fn prepare() -> std::io::Result<(NetEnter, NetParent)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    #[expect(unsafe_code, reason = "socketpair has no safe wrapper in libc")]
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    // SAFETY: both descriptors were just made and are owned by nobody else.
    #[expect(unsafe_code, reason = "taking ownership of fresh descriptors")]
    let (parent_end, child_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: geteuid and getegid only return numbers.
    #[expect(unsafe_code, reason = "geteuid/getegid have no safe wrapper in libc")]
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let enter = NetEnter {
        maps: (
            format!("{uid} {uid} 1\n").into_bytes(),
            format!("{gid} {gid} 1\n").into_bytes(),
        ),
        root: uid == 0,
        child_fd: child_end.as_raw_fd(),
    };
    Ok((
        enter,
        NetParent {
            child_end,
            parent_end,
        },
    ))
}

impl NetEnter {
    /// In the child: the namespace, its loopback, the listener, handed to the parent.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        let unshare = |flags| {
            // SAFETY: unshare takes flags and touches no memory.
            #[expect(unsafe_code, reason = "unshare before exec, no allocation")]
            let rc = unsafe { libc::unshare(flags) };
            if rc == 0 { Ok(()) } else { Err(last_error()) }
        };
        if !(self.root && unshare(libc::CLONE_NEWNET).is_ok()) {
            unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)?;
            let (uid_map, gid_map) = &self.maps;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid_map)?;
            write_file(c"/proc/self/gid_map", gid_map)?;
        }
        loopback_up()?;
        let listener = listen_loopback()?;
        let sent = send_fd(self.child_fd, listener);
        // SAFETY: the listener was made above and is closed once; the parent holds a copy.
        #[expect(unsafe_code, reason = "closing a raw descriptor before exec")]
        unsafe {
            libc::close(listener);
        }
        sent
    }
}

impl NetParent {
    /// After a successful spawn: the listener the child made.
    pub(crate) fn receive(self) -> std::io::Result<std::net::TcpListener> {
        drop(self.child_end);
        let fd = recv_fd(self.parent_end.as_raw_fd())?;
        // SAFETY: the descriptor came in an SCM_RIGHTS message and is owned by nobody else.
        #[expect(unsafe_code, reason = "taking ownership of a received descriptor")]
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(std::net::TcpListener::from(owned))
    }
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a buffer we own.
    #[expect(unsafe_code, reason = "raw file writes before exec, no allocation")]
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_error());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let err = last_error();
        libc::close(fd);
        if usize::try_from(n).ok() != Some(bytes.len()) {
            return Err(err);
        }
    }
    Ok(())
}

fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a datagram socket and one ioctl on a zeroed `ifreq` naming `lo`.
    #[expect(unsafe_code, reason = "SIOCSIFFLAGS has no safe wrapper in libc")]
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(last_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let rc = libc::ioctl(s, libc::SIOCSIFFLAGS, &req);
        let err = last_error();
        libc::close(s);
        if rc != 0 {
            return Err(err);
        }
    }
    Ok(())
}

fn listen_loopback() -> std::io::Result<RawFd> {
    // SAFETY: socket, bind and listen on a `sockaddr_in` built on the stack.
    #[expect(unsafe_code, reason = "a raw listener before exec, no allocation")]
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(last_error());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = PROXY_PORT.to_be();
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(s, (&raw const addr).cast(), len) != 0 || libc::listen(s, 128) != 0 {
            let err = last_error();
            libc::close(s);
            return Err(err);
        }
        Ok(s)
    }
}

/// Room for one descriptor's control message, aligned as `cmsghdr` wants.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Calls `f` with a one-byte message whose control buffer has room for one descriptor
/// (`controllen` bytes of it offered), all on this stack frame.
fn with_message<R>(controllen: usize, f: impl FnOnce(&mut libc::msghdr) -> R) -> R {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 64]);
    // SAFETY: an all-zero `msghdr` is a valid empty header; the pointers set below point at
    // locals that outlive `f`, and `controllen` is at most the buffer's size.
    #[expect(unsafe_code, reason = "msghdr has no safe constructor in libc")]
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = controllen.min(control.0.len()) as _;
    f(&mut msg)
}

fn send_fd(sock: RawFd, fd: RawFd) -> std::io::Result<()> {
    // SAFETY: the CMSG macros write within the control buffer `with_message` sized for one
    // descriptor; sendmsg reads the header it is given.
    #[expect(unsafe_code, reason = "SCM_RIGHTS has no safe wrapper in libc")]
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    with_message(space, |msg| {
        // SAFETY: as above.
        #[expect(unsafe_code, reason = "SCM_RIGHTS has no safe wrapper in libc")]
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            if cmsg.is_null() {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
            if libc::sendmsg(sock, msg, 0) != 1 {
                return Err(last_error());
            }
        }
        Ok(())
    })
}

fn recv_fd(sock: RawFd) -> std::io::Result<RawFd> {
    with_message(64, |msg| {
        // SAFETY: recvmsg into the buffers `with_message` made; the control message is read
        // only when the kernel says it is there and of the expected type.
        #[expect(unsafe_code, reason = "SCM_RIGHTS has no safe wrapper in libc")]
        unsafe {
            // The child sent before `exec`, which happened before `spawn` returned: the message
            // is already there, so this never waits.
            let n = libc::recvmsg(sock, msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
            if n < 0 {
                return Err(last_error());
            }
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            if n != 1
                || cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            {
                return Err(std::io::Error::other(
                    "the confined process did not hand over its network namespace's listener",
                ));
            }
            Ok(std::ptr::read_unaligned(
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
            ))
        }
    })
}
