/** Route config flag (`@RouteConfig({ [TEXT_BODY]: true })`): the route also takes a text/plain or text/markdown body. */
export const TEXT_BODY = 'acceptsTextBody';
export const TEXT_TYPES = ['text/plain', 'text/markdown'];

/** Fastify's documented way to type a route's config (declaration merging): the flag above. */
declare module 'fastify' {
  interface FastifyContextConfig {
    [TEXT_BODY]?: boolean;
  }
}
