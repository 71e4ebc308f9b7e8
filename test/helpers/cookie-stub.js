// `app.inject()` loads light-my-request, which requires `cookie`; its v2 is an ES module that Jest cannot require on
// Node 20. light-my-request needs it only for inject()'s `cookies` option, which no test passes: jest.config.js maps
// `cookie` here.
module.exports = {
  stringifySetCookie: () => {
    throw new Error('inject() with cookies is not available in these tests (the cookie module is stubbed)');
  },
};
