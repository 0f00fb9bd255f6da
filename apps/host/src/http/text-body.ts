/** Route config flag (`@RouteConfig({ [TEXT_BODY]: true })`): the route also takes a text/plain or text/markdown body. */
export const TEXT_BODY = 'acceptsTextBody';
export const TEXT_TYPES = ['text/plain', 'text/markdown'];
