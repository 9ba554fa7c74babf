// The gRPC health service (grpc.health.v1.Health), from our own generated code.
//
// A health Watch stream stays open until the client leaves, and grpc-js's
// tryShutdown waits for every open stream: left alone, one health watcher would
// stretch each graceful shutdown to its full grace period and then cancel the
// RunFunction calls still running. So shutdown() tells every watcher
// NOT_SERVING and then ends its stream.
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  status as Code,
  type MethodDefinition,
  type Server,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
} from "@grpc/grpc-js";
import {
  Health as HealthService,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../gen/grpc/health/v1/health_pb.js";

/** Health serves one status for the whole server and its named services. */
export interface Health {
  /** serving reports SERVING (after a start with starting), to watchers too. */
  serving(): void;
  /** shutdown reports NOT_SERVING to everyone and ends every Watch stream. */
  shutdown(): void;
}

function method<I extends DescMessage, O extends DescMessage>(
  name: string,
  input: I,
  output: O,
  responseStream: boolean,
): MethodDefinition<MessageShape<I>, MessageShape<O>> {
  return {
    path: `/${HealthService.typeName}/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: (m) => Buffer.from(toBinary(input, m)),
    requestDeserialize: (b) => fromBinary(input, b),
    responseSerialize: (m) => Buffer.from(toBinary(output, m)),
    responseDeserialize: (b) => fromBinary(output, b),
  };
}

const reply = (status: ServingStatus) => create(HealthCheckResponseSchema, { status });

/**
 * addHealth registers the health service for the named services ("" is the
 * server as a whole). With starting, it reports NOT_SERVING until serving()
 * (the function is still loading); watchers stay and are told when it is.
 */
export function addHealth(server: Server, services: readonly string[], opts: { starting?: boolean } = {}): Health {
  const known = new Set(["", ...services]);
  let status = opts.starting ? ServingStatus.NOT_SERVING : ServingStatus.SERVING;
  let down = false;
  const watchers = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();

  server.addService(
    {
      Check: method("Check", HealthCheckRequestSchema, HealthCheckResponseSchema, false),
      Watch: method("Watch", HealthCheckRequestSchema, HealthCheckResponseSchema, true),
    },
    {
      Check: (call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, callback: sendUnaryData<HealthCheckResponse>) => {
        if (!known.has(call.request.service)) {
          callback({ code: Code.NOT_FOUND, details: `health status unknown for service ${JSON.stringify(call.request.service)}` });
          return;
        }
        callback(null, reply(status));
      },
      Watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        if (!known.has(call.request.service)) {
          call.write(reply(ServingStatus.SERVICE_UNKNOWN));
          call.end();
          return;
        }
        call.write(reply(status));
        if (down) {
          call.end();
          return;
        }
        watchers.add(call);
        call.on("cancelled", () => watchers.delete(call));
      },
    },
  );

  return {
    serving() {
      if (down || status === ServingStatus.SERVING) return;
      status = ServingStatus.SERVING;
      for (const w of watchers) w.write(reply(status));
    },
    shutdown() {
      down = true;
      status = ServingStatus.NOT_SERVING;
      for (const w of watchers) {
        w.write(reply(status));
        w.end();
      }
      watchers.clear();
    },
  };
}
