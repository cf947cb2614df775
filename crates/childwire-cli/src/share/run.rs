//! The two programs: the share (a socket in front of one shared server) and
//! connect (stdio relayed to it).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use childwire::tokio::{Tokio, TokioIo};
use childwire::{ChannelConfig, Command, Config, Received};
use childwire_core::jsonrpc::oversized_error;
use childwire_share::{Client, ShareConfig, SharedServer};

use super::ShareOptions;
use super::endpoint::{lock, peer_is_me, private_dir, suffixed, try_connect};

/// How long `connect` waits for a share it started to listen.
const START_WAIT: Duration = Duration::from_secs(10);

/// `childwire share`: 0 when the server ended (or another share owns the
/// endpoint).
pub(crate) fn share(options: &ShareOptions) -> io::Result<u8> {
    let endpoint = Path::new(&options.endpoint);
    private_dir(endpoint)?;
    let Some(_lock) = lock(endpoint)? else {
        note!(
            "childwire share: another share owns {}; leaving it the endpoint",
            endpoint.display()
        );
        return Ok(0);
    };
    // Holding the lock, any socket file there is a dead share's.
    match fs::remove_file(endpoint) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let code = runtime.block_on(serve(options, endpoint))?;
    let _ = fs::remove_file(endpoint);
    Ok(code)
}

async fn serve(options: &ShareOptions, endpoint: &Path) -> io::Result<u8> {
    let listener = tokio::net::UnixListener::bind(endpoint)?;
    fs::set_permissions(endpoint, fs::Permissions::from_mode(0o600))?;
    let mut command = Command::new(&options.server.program);
    command.args(&options.server.args);
    let mut config = ShareConfig::default();
    config.linger = options.linger;
    let server = SharedServer::<Tokio>::spawn(&command, Config::default(), config)
        .map_err(io::Error::other)?;
    note!(
        "childwire share: serving {} on {}",
        options.server.program.to_string_lossy(),
        endpoint.display()
    );
    let stopped = server.stopped();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            report = &mut stopped => {
                // No one can join a share whose server ended: the socket goes.
                let _ = fs::remove_file(endpoint);
                match report {
                    Some(report) => note!("childwire share: the server {report}"),
                    None => note!("childwire share: the server's output ended"),
                }
                return Ok(0);
            }
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                match peer_is_me(&stream) {
                    Ok(true) => {}
                    Ok(false) => {
                        note!("childwire share: refused a connection from another user");
                        continue;
                    }
                    Err(err) => {
                        note!("childwire share: refused a connection: {err}");
                        continue;
                    }
                }
                match server.connect() {
                    Ok(client) => {
                        note!("childwire share: {} joined ({} connected)", client.id(), server.clients());
                        tokio::spawn(relay_client(stream, client));
                    }
                    Err(err) => note!("childwire share: refused a connection: {err}"),
                }
            }
        }
    }
}

/// One connection: its messages to the share, the share's to it, until
/// either side ends; then the client leaves.
async fn relay_client(stream: tokio::net::UnixStream, client: Client<Tokio>) {
    let (read, write) = stream.into_split();
    let channel = ChannelConfig::default();
    let limit = channel.max_message_size;
    let Ok(peer) =
        childwire::Transport::<Tokio>::from_pipes(TokioIo(read), TokioIo(write), &channel)
    else {
        return;
    };
    let (to_peer, mut from_peer) = peer.split();
    let client = Arc::new(client);
    loop {
        tokio::select! {
            item = from_peer.recv() => match item {
                Some(Received::Message(message)) => {
                    if client.send(message).await.is_err() {
                        break;
                    }
                }
                // A request over the limit: its sender gets the error.
                Some(Received::Oversized(notice)) => {
                    if let Some(id) = notice.json_rpc_id().filter(|id| &id[..] != b"null") {
                        let _ = to_peer.send(oversized_error(id, notice.len, limit)).await;
                    }
                }
                Some(_) => {}
                None => break,
            },
            message = client.recv() => match message {
                Some(message) => {
                    if to_peer.send(message).await.is_err() {
                        break;
                    }
                }
                None => {
                    if let Some(why) = client.disconnected() {
                        note!("childwire share: {} disconnected: {why}", client.id());
                    }
                    break;
                }
            },
        }
    }
    let id = client.id();
    drop(client);
    let _ = to_peer.close().await;
    note!("childwire share: {id} left");
}

/// `childwire connect`: 0 when the host closed its side, 1 when the share
/// ended the session.
pub(crate) fn connect(options: &ShareOptions) -> io::Result<u8> {
    let endpoint = Path::new(&options.endpoint);
    private_dir(endpoint)?;
    let stream = match try_connect(endpoint)? {
        Some(stream) => stream,
        None => {
            start_share(options, endpoint)?;
            wait_for_share(endpoint)?
        }
    };
    relay_stdio(stream)
}

/// Starts `childwire share` for this endpoint and server, detached from
/// this process's group (the host's signals are for this session only),
/// its log in `ENDPOINT.log`.
fn start_share(options: &ShareOptions, endpoint: &Path) -> io::Result<()> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(suffixed(endpoint, ".log"))?;
    let mut share = std::process::Command::new(std::env::current_exe()?);
    share
        .arg("share")
        .arg("--endpoint")
        .arg(endpoint)
        .arg("--")
        .arg(&options.server.program)
        .args(&options.server.args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0);
    let mut child = share.spawn()?;
    // Reaped when it ends, whether this session outlives it or not.
    thread::spawn(move || child.wait());
    Ok(())
}

/// A connection to the share at `endpoint`, once one listens (two connects
/// may each start one: the lock leaves one).
fn wait_for_share(endpoint: &Path) -> io::Result<UnixStream> {
    let deadline = Instant::now() + START_WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(stream) = try_connect(endpoint)? {
            return Ok(stream);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no share listens on {} after {START_WAIT:?}; see {}",
                    endpoint.display(),
                    suffixed(endpoint, ".log").display()
                ),
            ));
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Copies stdin to the share and the share to stdout, until the host
/// closes stdin (then waits for the share's last messages) or the share
/// closes the connection (then the session is over: exit 1, whatever the
/// host still writes).
fn relay_stdio(stream: UnixStream) -> io::Result<u8> {
    let host_done = Arc::new(AtomicBool::new(false));
    let from_share = stream.try_clone()?;
    let done = Arc::clone(&host_done);
    let outward = thread::spawn(move || -> io::Result<()> {
        let mut from_share = from_share;
        let mut stdout = io::stdout().lock();
        let mut buf = vec![0; 64 * 1024];
        let result = loop {
            match from_share.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    if let Err(err) = stdout.write_all(&buf[..n]).and_then(|()| stdout.flush()) {
                        break Err(err);
                    }
                }
                Err(err) => break Err(err),
            }
        };
        if !done.load(Ordering::Acquire) {
            // The share ended the session while the host still talks.
            note!("childwire connect: the share closed the session");
            std::process::exit(1);
        }
        result
    });
    let mut to_share = stream;
    let copied = io::copy(&mut io::stdin().lock(), &mut to_share);
    host_done.store(true, Ordering::Release);
    // The host is done: our side of the session ends, the share's last
    // messages still come.
    let _ = to_share.shutdown(Shutdown::Write);
    let out = outward.join().unwrap_or(Ok(()));
    match (copied, out) {
        (Ok(_), Ok(())) => Ok(0),
        (Err(err), _) | (Ok(_), Err(err)) if err.kind() == io::ErrorKind::BrokenPipe => Ok(1),
        (Err(err), _) | (Ok(_), Err(err)) => Err(err),
    }
}
