// Error handling in the API layer: ApiError -> problem+json.
export class ApiError extends Error { constructor(public code: string, public status = 500) { super(code); } }
