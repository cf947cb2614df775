//! Every name a user reaches for is in every runtime module and in the
//! facade: the shared list (`childwire_async::prelude`) and each module's
//! own constructors. A name missing from one of them fails to compile.

use std::any::TypeId;

/// Imports the shared list from `$module` and checks, for a few of them,
/// that they are the very types the facade has (one list, not copies).
macro_rules! shared_names {
    ($module:ident) => {
        mod $module {
            #[allow(unused_imports)]
            use childwire::$module::{
                Bytes, ChannelConfig, Closed, Command, Config, ConfigError, Containment,
                ContentLength, Counters, EncodeErrorKind, EndedBy, EnvPolicy, Exit, ExitHandle,
                ExitReport, ExitSlot, Framing, Goodbye, Lines, Malformed, MalformedReason, Message,
                NoRuntime, Oversized, PipeRead, PipeWrite, Received, Receiver, Reply,
                STDERR_LINES_PENDING, SendError, SendErrorKind, Sender, ShutdownError, SpawnError,
                StderrCallback, StderrLines, StderrMode, StderrTailConfig, Tap, TapEvent,
                Transport, from_stream, from_stream_with, stdio,
            };

            pub(super) fn ids() -> [std::any::TypeId; 6] {
                use std::any::TypeId;
                [
                    TypeId::of::<ContentLength>(),
                    TypeId::of::<StderrLines>(),
                    TypeId::of::<Bytes>(),
                    TypeId::of::<SpawnError>(),
                    TypeId::of::<ShutdownError>(),
                    TypeId::of::<Transport<ContentLength>>(),
                ]
            }
        }
    };
}

shared_names!(tokio);
shared_names!(smol);
shared_names!(async_std);

#[test]
fn each_runtime_module_has_the_shared_names_and_its_own() {
    use childwire::{Bytes, ContentLength, ShutdownError, SpawnError, StderrLines};
    #[allow(unused_imports)]
    use childwire::{
        async_std::{AsyncStd, FuturesIo as _, Socket as _},
        smol::{FuturesIo, Smol, Socket as _},
        tokio::{Tokio, TokioIo, spawn_command},
    };

    let facade = [
        TypeId::of::<ContentLength>(),
        TypeId::of::<StderrLines>(),
        TypeId::of::<Bytes>(),
        TypeId::of::<SpawnError>(),
        TypeId::of::<ShutdownError>(),
    ];
    for (name, ids) in [
        ("tokio", tokio::ids()),
        ("smol", smol::ids()),
        ("async_std", async_std::ids()),
    ] {
        assert_eq!(ids[..5], facade, "{name}");
    }
    // Each module's `Transport` is the generic one on its own runtime.
    assert_eq!(
        tokio::ids()[5],
        TypeId::of::<childwire::Transport<Tokio, ContentLength>>()
    );
    assert_eq!(
        smol::ids()[5],
        TypeId::of::<childwire::Transport<Smol, ContentLength>>()
    );
    assert_eq!(
        async_std::ids()[5],
        TypeId::of::<childwire::Transport<AsyncStd, ContentLength>>()
    );
}
