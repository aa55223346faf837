// oidc-provider's storage for the test providers: everything in one Map,
// for the life of the process. `onUpsert(modelName)` is told of each write
// (a provider counting what it issued).
export function memoryAdapter(onUpsert = () => {}) {
  const store = new Map();
  return class MemoryAdapter {
    constructor(name) {
      this.name = name;
    }
    static store = store;
    key(id) {
      return `${this.name}:${id}`;
    }
    async upsert(id, payload) {
      onUpsert(this.name);
      store.set(this.key(id), payload);
      if (payload.uid) store.set(`${this.name}:uid:${payload.uid}`, id);
    }
    async find(id) {
      return store.get(this.key(id));
    }
    async findByUid(uid) {
      const id = store.get(`${this.name}:uid:${uid}`);
      return id && store.get(this.key(id));
    }
    async findByUserCode() {}
    async consume(id) {
      const p = store.get(this.key(id));
      if (p) p.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id) {
      store.delete(this.key(id));
    }
    async revokeByGrantId() {}
  };
}
