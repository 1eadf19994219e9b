-- | Status codes of the protocol (PROTOCOL.md 2.3) and the error they raise.
module Cumulo.Status
  ( Status
  , statusOk, statusTimeout, statusNoService, statusQueueFull, statusCrashed
  , statusMalformed, statusShuttingDown, statusServiceError, statusTooLarge
  , statusInvalidArgument, statusUnsupportedVersion, statusUnauthorized, statusProtocol
  , statusUnavailable
  , statusName
  , CumuloError (..)
  , ConnectionClosed (..)
  ) where

import Control.Exception (Exception)
import Data.Text (Text)
import qualified Data.Text as T
import Data.Word (Word16)

-- | A status code as on the wire; codes this SDK does not know are kept as they are.
type Status = Word16

statusOk, statusTimeout, statusNoService, statusQueueFull, statusCrashed, statusMalformed,
  statusShuttingDown, statusServiceError, statusTooLarge, statusInvalidArgument,
  statusUnsupportedVersion, statusUnauthorized, statusProtocol, statusUnavailable :: Status
statusOk = 0
statusTimeout = 1
statusNoService = 2
statusQueueFull = 3
statusCrashed = 4
statusMalformed = 5
statusShuttingDown = 6
statusServiceError = 7
statusTooLarge = 8
statusInvalidArgument = 9
statusUnsupportedVersion = 10
statusUnauthorized = 11
statusProtocol = 12
statusUnavailable = 13

-- | The name of a status as PROTOCOL.md spells it (@NO_SERVICE@), or @STATUS_<n>@.
statusName :: Status -> Text
statusName s
  | fromIntegral s < length names = T.pack (names !! fromIntegral s)
  | otherwise = T.pack ("STATUS_" ++ show s)
  where
    names =
      [ "OK", "TIMEOUT", "NO_SERVICE", "QUEUE_FULL", "CRASHED", "MALFORMED", "SHUTTING_DOWN"
      , "SERVICE_ERROR", "TOO_LARGE", "INVALID_ARGUMENT", "UNSUPPORTED_VERSION", "UNAUTHORIZED"
      , "PROTOCOL", "UNAVAILABLE" ]

-- | A call failed with a status of the protocol: the core's (or a service's)
-- answer, a decode error (@MALFORMED@, @TOO_LARGE@) or a local timeout.
data CumuloError = CumuloError
  { errorStatus :: !Status
  , errorMessage :: !Text
  } deriving (Eq)

instance Show CumuloError where
  show (CumuloError s m) = T.unpack (statusName s) ++ ": " ++ T.unpack m

instance Exception CumuloError

-- | The connection to the core is gone (closed by the core, or a socket error).
newtype ConnectionClosed = ConnectionClosed String deriving (Eq, Show)

instance Exception ConnectionClosed
