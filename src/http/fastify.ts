/** The Fastify instance every route module registers on: Node's HTTP server, with TypeBox schemas as types. */
import type { FastifyBaseLogger, FastifyInstance, FastifyPluginAsync, FastifyPluginOptions } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export type App = FastifyInstance<Server, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

/** A route group: a Fastify plugin on the App, with the options it is registered with. */
export type AppPlugin<Options extends FastifyPluginOptions> = FastifyPluginAsync<Options, Server, TypeBoxTypeProvider>;
