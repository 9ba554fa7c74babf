// The gRPC health service (grpc.health.v1.Health), from our own generated code.
//
// A health Watch stream stays open until the client leaves, and grpc-js's
// tryShutdown waits for every open stream: left alone, one health watcher would
// stretch each graceful shutdown to its full grace period and then cancel the
// RunFunction calls still running. So shutdown() tells every watcher
// NOT_SERVING and then ends its stream.
import {
  status as Code,
  type MethodDefinition,
  type Server,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
} from "@grpc/grpc-js";

/** Health serves one status for the whole server and its named services. */
export interface Health {
  /** serving reports SERVING (after a start with starting), to watchers too. */
  serving(): void;
  /** shutdown reports NOT_SERVING to everyone and ends every Watch stream. */
  shutdown(): void;
}

type State = "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";

/**
 * The messages' code (protobuf-es and the generated health types), loaded by
 * the first health call: a server's thread otherwise needs none of
 * protobuf-es, and loading it cost a bundle's start some 25 ms.
 */
type Messages = {
  decode(b: Buffer): { service: string };
  encode(state: State): Buffer;
};
let messages: Promise<Messages> | undefined;
let loaded: Messages | undefined;
function load(): Promise<Messages> {
  return (messages ??= Promise.all([import("@bufbuild/protobuf"), import("../gen/grpc/health/v1/health_pb.js")]).then(([pb, health]) => {
    loaded = {
      decode: (b) => pb.fromBinary(health.HealthCheckRequestSchema, b),
      encode: (state) =>
        Buffer.from(
          pb.toBinary(
            health.HealthCheckResponseSchema,
            pb.create(health.HealthCheckResponseSchema, { status: health.HealthCheckResponse_ServingStatus[state] }),
          ),
        ),
    };
    return loaded;
  }));
}

/** The service's full name (grpc.health.v1), as its generated descriptor has it (test/server/codes.test.ts). */
export const HEALTH_SERVICE = "grpc.health.v1.Health";

/** serviceOf is the service a HealthCheckRequest names, or an error naming why its bytes are not one. */
function serviceOf(m: Messages, b: Buffer): string | Error {
  try {
    return m.decode(b).service;
  } catch (err) {
    return new Error(`cannot decode HealthCheckRequest: ${(err as Error).message}`);
  }
}

/** method is one of the service's methods, its messages as bytes: the handlers decode and encode them (load). */
function method(name: string, responseStream: boolean): MethodDefinition<Buffer, Buffer> {
  return {
    path: `/${HEALTH_SERVICE}/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: (m) => m,
    requestDeserialize: (b) => b,
    responseSerialize: (m) => m,
    responseDeserialize: (b) => b,
  };
}

/**
 * addHealth registers the health service for the named services ("" is the
 * server as a whole). With starting, it reports NOT_SERVING until serving()
 * (the function is still loading); watchers stay and are told when it is.
 */
export function addHealth(server: Server, services: readonly string[], opts: { starting?: boolean } = {}): Health {
  const known = new Set(["", ...services]);
  let status: State = opts.starting ? "NOT_SERVING" : "SERVING";
  let down = false;
  const watchers = new Set<ServerWritableStream<Buffer, Buffer>>();

  server.addService(
    { Check: method("Check", false), Watch: method("Watch", true) },
    {
      Check: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
        load().then(
          (m) => {
            const service = serviceOf(m, call.request);
            if (service instanceof Error) callback({ code: Code.INVALID_ARGUMENT, details: service.message });
            else if (!known.has(service))
              callback({ code: Code.NOT_FOUND, details: `health status unknown for service ${JSON.stringify(service)}` });
            else callback(null, m.encode(status));
          },
          (err: Error) => callback({ code: Code.INTERNAL, details: `cannot load the health messages: ${err.message}` }),
        );
      },
      Watch: (call: ServerWritableStream<Buffer, Buffer>) => {
        load().then(
          (m) => {
            const service = serviceOf(m, call.request);
            if (service instanceof Error) {
              call.destroy(Object.assign(service, { code: Code.INVALID_ARGUMENT }));
              return;
            }
            if (!known.has(service)) {
              call.write(m.encode("SERVICE_UNKNOWN"));
              call.end();
              return;
            }
            call.write(m.encode(status));
            if (down) {
              call.end();
              return;
            }
            watchers.add(call);
            call.on("cancelled", () => watchers.delete(call));
          },
          () => call.end(),
        );
      },
    },
  );

  return {
    serving() {
      if (down || status === "SERVING") return;
      status = "SERVING";
      // A watcher is there only once its call has loaded the messages.
      for (const w of watchers) w.write(loaded!.encode(status));
    },
    shutdown() {
      down = true;
      status = "NOT_SERVING";
      for (const w of watchers) {
        w.write(loaded!.encode(status));
        w.end();
      }
      watchers.clear();
    },
  };
}
